#include "sparkctl/up/launch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

using testing::DemoProfile;
using testing::Ring;

bool Has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it != argv.end() && it + 1 != argv.end() && *(it + 1) == value;
}

TEST(LaunchPlanTest, OneRankPerNodeInRankOrder) {
  auto plan = PlanLaunch(DemoProfile(), Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const RankLaunch& rank = plan->ranks[r];
    EXPECT_EQ(rank.rank, r);
    EXPECT_EQ(rank.node, "spark-" + std::to_string(r));
    EXPECT_TRUE(Has(rank.argv, "--rank", std::to_string(r)));
    EXPECT_TRUE(Has(rank.argv, "--tp", "4"));
    EXPECT_TRUE(Has(rank.argv, "--master-addr", "198.19.0.10")) << "rank 0's management address";
    EXPECT_TRUE(Has(rank.argv, "--status-file", rank.status_path));
    EXPECT_TRUE(Has(rank.argv, "--num-kv-blocks", "512"));  // 8192 tokens / 16
    EXPECT_TRUE(Has(rank.argv, "--backend", "cpu"));
    // The profile's memory guard (a Spark's floors by default).
    EXPECT_TRUE(Has(rank.argv, "--memory-floor-gib", "5"));
    EXPECT_TRUE(Has(rank.argv, "--admit-floor-gib", "3"));
    EXPECT_TRUE(Has(rank.argv, "--hard-floor-gib", "1"));
    EXPECT_EQ(rank.status_path, "/run/sparkctl/up/demo/rank" + std::to_string(r) + ".json");
    EXPECT_EQ(rank.log_path, "/var/log/sparkctl/demo-rank" + std::to_string(r) + ".log");
  }
  EXPECT_EQ(plan->ranks[0].argv[0], kRemoteEnginePath);
  EXPECT_EQ(plan->ranks[0].argv[1], "serve");
  EXPECT_EQ(plan->endpoint, "http://127.0.0.1:8000");
  EXPECT_EQ(plan->api_node, "spark-0");
  EXPECT_EQ(plan->served_name, "qwen3-tiny-demo");
}

TEST(LaunchPlanTest, TlsAndLimitsReachTheEngineAndTheEndpoint) {
  profile::Profile p = DemoProfile();
  p.api.bind = "0.0.0.0";
  p.api.key_file = "/etc/sparkctl/keys";
  p.api.tls = {"/etc/s/cert.pem", "/etc/s/key.pem", "/etc/s/clients.pem"};
  p.api.limits.max_requests_per_peer = 16;
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& argv = plan->ranks[0].argv;
  EXPECT_TRUE(Has(argv, "--ssl-certfile", "/etc/s/cert.pem"));
  EXPECT_TRUE(Has(argv, "--ssl-keyfile", "/etc/s/key.pem"));
  EXPECT_TRUE(Has(argv, "--ssl-ca-certs", "/etc/s/clients.pem"));
  EXPECT_TRUE(Has(argv, "--max-requests-per-peer", "16"));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--max-connections"), 0) << "defaults stay";
  EXPECT_EQ(plan->endpoint, "https://127.0.0.1:8000");
  EXPECT_EQ(plan->advertised_host, "198.19.0.10") << "a wildcard bind: rank 0's address";
  EXPECT_FALSE(plan->clear_text);
  p.api.tls = {};
  auto clear = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(clear.ok());
  EXPECT_EQ(clear->endpoint, "http://127.0.0.1:8000");
  EXPECT_TRUE(clear->clear_text);
  EXPECT_FALSE(PlanLaunch(DemoProfile(), Ring(), {})->clear_text) << "loopback";
}

TEST(LaunchPlanTest, ControlTrafficUsesTheControlAddresses) {
  LaunchOptions o;
  for (int r = 0; r < 4; ++r) {
    o.control_addresses["spark-" + std::to_string(r)] = "10.253.255." + std::to_string(r + 1);
  }
  auto plan = PlanLaunch(DemoProfile(), Ring(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const RankLaunch& rank : plan->ranks) {
    EXPECT_TRUE(Has(rank.argv, "--master-addr", "10.253.255.1")) << "rank 0's tunnel address";
    EXPECT_EQ(rank.control_address, "10.253.255." + std::to_string(rank.rank + 1));
    EXPECT_EQ(rank.address, "198.19.0." + std::to_string(rank.rank + 10)) << "SSH stays";
  }
  auto plain = PlanLaunch(DemoProfile(), Ring(), {});
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->hash, plan->hash) << "moving the control traffic restarts the model";
}

TEST(LaunchPlanTest, WeightDtypeAndCudaGraphsReachTheEngine) {
  profile::Profile base = DemoProfile();
  base.engine.kv_cache.dtype = profile::KvCacheDtype::kAuto;
  auto plain = PlanLaunch(base, Ring(), {});
  ASSERT_TRUE(plain.ok());
  for (const char* flag : {"--weight-dtype", "--kv-dtype", "--cuda-graphs"}) {
    EXPECT_EQ(
        std::count(plain->ranks[0].argv.begin(), plain->ranks[0].argv.end(), std::string(flag)), 0)
        << flag << " only when the profile asks";
  }
  profile::Profile p = DemoProfile();
  p.engine.backend = "cuda";
  p.engine.weight_dtype = "bf16";
  p.engine.kv_cache.dtype = profile::KvCacheDtype::kBf16;
  p.engine.cuda_graphs = true;
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const RankLaunch& rank : plan->ranks) {
    EXPECT_TRUE(Has(rank.argv, "--weight-dtype", "bf16"));
    EXPECT_TRUE(Has(rank.argv, "--kv-dtype", "bf16"));
    EXPECT_EQ(std::count(rank.argv.begin(), rank.argv.end(), std::string("--cuda-graphs")), 1);
  }
}

size_t Count(const std::vector<std::string>& argv, const std::string& flag) {
  return static_cast<size_t>(std::count(argv.begin(), argv.end(), flag));
}

// Every engine field of a profile either reaches the engine's command line or is refused.
TEST(LaunchPlanTest, EveryEngineFieldReachesTheEngine) {
  profile::Profile p = DemoProfile();
  p.engine.kv_cache.tokens.reset();
  p.engine.kv_cache.memory_fraction = 0.82;
  p.engine.chunked_prefill = 4096;
  p.engine.prefix_caching = false;
  p.engine.reasoning_parser = "deepseek_v4";
  p.engine.tool_parser = "qwen3";
  p.api.default_max_tokens = 512;
  p.api.max_tokens_limit = 4096;
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const RankLaunch& rank : plan->ranks) {
    EXPECT_TRUE(Has(rank.argv, "--kv-memory-fraction", "0.82"));
    EXPECT_EQ(Count(rank.argv, "--num-kv-blocks"), 0u) << "one budget only";
    EXPECT_TRUE(Has(rank.argv, "--max-batched-tokens", "4096"));
    EXPECT_EQ(Count(rank.argv, "--no-prefix-caching"), 1u);
    EXPECT_EQ(Count(rank.argv, "--no-chunked-prefill"), 0u);
    EXPECT_TRUE(Has(rank.argv, "--reasoning-parser", "deepseek_v4"));
    EXPECT_TRUE(Has(rank.argv, "--tool-parser", "qwen3"));
    EXPECT_TRUE(Has(rank.argv, "--default-max-tokens", "512"));
    EXPECT_TRUE(Has(rank.argv, "--max-tokens-limit", "4096"));
  }
  p.engine.chunked_prefill = 0;
  p.engine.prefix_caching = true;
  p.engine.reasoning_parser.clear();
  plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<std::string>& argv = plan->ranks[0].argv;
  EXPECT_EQ(Count(argv, "--no-chunked-prefill"), 1u);
  EXPECT_EQ(Count(argv, "--max-batched-tokens"), 0u);
  EXPECT_EQ(Count(argv, "--no-prefix-caching"), 0u);
  EXPECT_EQ(Count(argv, "--reasoning-parser"), 0u);
  EXPECT_EQ(Count(argv, "--default-max-tokens"), 1u);
}

TEST(LaunchPlanTest, KvCacheTypesGoToTheEngineWhichRefusesWhatItLacks) {
  profile::Profile p = DemoProfile();
  p.engine.kv_cache.dtype = profile::KvCacheDtype::kFp8;
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(Has(plan->ranks[0].argv, "--kv-dtype", "fp8")) << "never dropped on the way";
}

TEST(LaunchPlanTest, MtpIsRefusedByNameAndDsparkReachesEveryRank) {
  profile::Profile p = DemoProfile();
  p.engine.speculative = {.method = "mtp", .num_speculative_tokens = 4};
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("engine.speculative.method mtp: not implemented"),
            std::string::npos)
      << plan.status().message();
  // dspark reaches every rank (each runs its shard of the draft stack).
  p.engine.speculative = {.method = "dspark", .num_speculative_tokens = 5};
  plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& rank : plan->ranks) {
    EXPECT_TRUE(Has(rank.argv, "--speculative-method", "dspark"));
    EXPECT_TRUE(Has(rank.argv, "--num-speculative-tokens", "5"));
    EXPECT_EQ(std::find(rank.argv.begin(), rank.argv.end(), "--prompt-lookup-max"),
              rank.argv.end())
        << "ngram's fields only";
  }
}

TEST(LaunchPlanTest, NgramSpeculationReachesEveryRank) {
  profile::Profile p = DemoProfile();
  p.engine.speculative = {.method = "ngram", .num_speculative_tokens = 5, .prompt_lookup_max = 3};
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& rank : plan->ranks) {
    EXPECT_TRUE(Has(rank.argv, "--speculative-method", "ngram"));
    EXPECT_TRUE(Has(rank.argv, "--num-speculative-tokens", "5"));
    EXPECT_TRUE(Has(rank.argv, "--prompt-lookup-max", "3"));
    EXPECT_TRUE(Has(rank.argv, "--prompt-lookup-min", "1"));
  }
}

// engine.collectives: the threshold and wire from the profile, each rank's links from the plan.
TEST(LaunchPlanTest, OneShotThresholdAndLinksReachTheEngine) {
  profile::Profile p = DemoProfile();
  p.engine.collectives.oneshot_max_bytes = 65536;
  p.engine.collectives.wire = "rdma";
  auto missing = PlanLaunch(p, Ring(), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("spark-0 has none"), std::string::npos)
      << missing.status().ToString();
  LaunchOptions o;
  for (int r = 0; r < 4; ++r) {
    netplan::OneShotLinks l;
    l.topology = "ring";
    l.addresses = {"198.18.0." + std::to_string(r), "198.18.2." + std::to_string(r)};
    l.rails = {{"rocep1s0f1:3"}, {"rocep1s0f0:3"}};
    o.oneshot_links["spark-" + std::to_string(r)] = l;
  }
  auto plan = PlanLaunch(p, Ring(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& argv = plan->ranks[2].argv;
  EXPECT_TRUE(Has(argv, "--oneshot-max-bytes", "65536"));
  EXPECT_TRUE(Has(argv, "--oneshot-wire", "rdma"));
  EXPECT_TRUE(Has(argv, "--oneshot-topology", "ring"));
  EXPECT_TRUE(Has(argv, "--oneshot-addr", "198.18.0.2,198.18.2.2"));
  EXPECT_TRUE(Has(argv, "--oneshot-rails", "rocep1s0f1:3,rocep1s0f0:3"));
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--oneshot-traffic-class"), argv.end())
      << "no lossless class in the plan, none asked for";
  // A switched fabric's lossless class (NCCL_IB_TC in the node's NCCL env) reaches the verbs
  // wire's queue pairs too.
  o.nccl_env["spark-2"] = {{"NCCL_IB_TC", "106"}};
  auto tc = PlanLaunch(p, Ring(), o);
  ASSERT_TRUE(tc.ok()) << tc.status().ToString();
  EXPECT_TRUE(Has(tc->ranks[2].argv, "--oneshot-traffic-class", "106"));
  o.nccl_env.erase("spark-2");
  auto off = PlanLaunch(DemoProfile(), Ring(), o);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(std::find(off->ranks[0].argv.begin(), off->ranks[0].argv.end(), "--oneshot-max-bytes"),
            off->ranks[0].argv.end());
  EXPECT_NE(off->hash, plan->hash) << "turning the one-shot path on restarts the model";
}

TEST(LaunchPlanTest, ProfileEnvOverridesNcclEnv) {
  profile::Profile p = DemoProfile();
  p.env["NCCL_ALGO"] = "Tree";
  p.env["OMP_NUM_THREADS"] = "2";
  LaunchOptions o;
  o.nccl_env["spark-1"] = {{"NCCL_ALGO", "Ring"}, {"NCCL_IB_GID_INDEX", "3"}};
  auto plan = PlanLaunch(p, Ring(), o);
  ASSERT_TRUE(plan.ok());
  const auto& env = plan->ranks[1].env;
  auto find = [&](const std::string& k) -> std::string {
    for (const auto& e : env) {
      if (e.name == k) return e.value;
    }
    return "<absent>";
  };
  EXPECT_EQ(find("NCCL_ALGO"), "Tree");
  EXPECT_EQ(find("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(find("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](auto& e) { return e.name == "NCCL_ALGO"; }),
            1);
  EXPECT_EQ(find("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(plan->ranks[2].env.size(), 2u) << "spark-2 has no NCCL env, only the profile's";
}

// The bundle's tuner plugin is named to NCCL on nodes with an NCCL environment, once (a plan
// rebuilt from a previous one's env does not add it twice), and the profile's env wins.
TEST(LaunchPlanTest, NodesWithNcclEnvLoadTheBundlesTunerPlugin) {
  LaunchOptions o;
  o.nccl_env["spark-1"] = {{"SPARK_NCCL_TOPOLOGY", "ring"}};
  o.nccl_tuner_plugin = "/opt/b/lib/libnccl-tuner-spark.so";
  auto count = [](const std::vector<netplan::EnvVar>& env, const std::string& value) {
    return std::count(env.begin(), env.end(), netplan::EnvVar{"NCCL_TUNER_PLUGIN", value});
  };
  auto plan = PlanLaunch(DemoProfile(), Ring(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(count(plan->ranks[1].env, o.nccl_tuner_plugin), 1);
  EXPECT_EQ(count(plan->ranks[2].env, o.nccl_tuner_plugin), 0) << "no NCCL env, no plugin";
  LaunchOptions again = o;
  again.nccl_env["spark-1"] = plan->ranks[1].env;
  auto replanned = PlanLaunch(DemoProfile(), Ring(), again);
  ASSERT_TRUE(replanned.ok());
  EXPECT_EQ(replanned->ranks[1].env, plan->ranks[1].env);
  EXPECT_EQ(replanned->hash, plan->hash);
  LaunchOptions none = o;
  none.nccl_tuner_plugin.clear();
  EXPECT_NE(PlanLaunch(DemoProfile(), Ring(), none)->hash, plan->hash);
  profile::Profile own = DemoProfile();
  own.env["NCCL_TUNER_PLUGIN"] = "/elsewhere/tuner.so";
  auto mine = PlanLaunch(own, Ring(), o);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(count(mine->ranks[1].env, "/elsewhere/tuner.so"), 1);
  EXPECT_EQ(count(mine->ranks[1].env, o.nccl_tuner_plugin), 0);
}

TEST(LaunchPlanTest, HashChangesWithWhatNeedsARestart) {
  const std::string base = PlanLaunch(DemoProfile(), Ring(), {})->hash;
  EXPECT_EQ(base.size(), 64u);
  profile::Profile same = DemoProfile();
  same.source_file = "/elsewhere/copy.yaml";
  EXPECT_EQ(PlanLaunch(same, Ring(), {})->hash, base) << "where the profile lives is not a change";

  profile::Profile port = DemoProfile();
  port.api.port = 8001;
  EXPECT_NE(PlanLaunch(port, Ring(), {})->hash, base);
  profile::Profile env = DemoProfile();
  env.env["X"] = "1";
  EXPECT_NE(PlanLaunch(env, Ring(), {})->hash, base);
  LaunchOptions build;
  build.engine_sha256 = "ab";
  EXPECT_NE(PlanLaunch(DemoProfile(), Ring(), build)->hash, base) << "a new engine build";
  netplan::ClusterSpec moved = Ring();
  moved.nodes[1].address = "198.19.0.99";
  EXPECT_NE(PlanLaunch(DemoProfile(), moved, {})->hash, base);
}

TEST(LaunchPlanTest, RefusesUndiscoveredOrTooSmallClusters) {
  auto unranked = PlanLaunch(DemoProfile(), Ring(4, false), {});
  EXPECT_EQ(unranked.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(unranked.status().message().find("sparkctl discover"), std::string::npos);
  auto small = PlanLaunch(DemoProfile(), Ring(2), {});
  EXPECT_EQ(small.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(small.status().message().find("needs 4 nodes"), std::string::npos);
  profile::Profile tp2 = DemoProfile();
  tp2.engine.tp = 2;
  EXPECT_EQ(PlanLaunch(tp2, Ring(), {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(LaunchPlanTest, StartCommandSupervisesWithPidfileOrSystemd) {
  profile::Profile p = DemoProfile();
  p.env["A"] = "it's";
  auto plan = PlanLaunch(p, Ring(), {});
  ASSERT_TRUE(plan.ok());
  const RankLaunch& r = plan->ranks[2];
  const std::string plain = StartCommand(*plan, r, false);
  EXPECT_NE(plain.find("setsid -f"), std::string::npos);
  EXPECT_NE(plain.find("env -u SPARKCTL_RUN_ID"), std::string::npos);
  EXPECT_NE(plain.find("ulimit -l 8192"), std::string::npos);
  EXPECT_NE(plain.find(r.pid_path), std::string::npos);
  EXPECT_NE(plain.find(">> '/var/log/sparkctl/demo-rank2.log' 2>&1"), std::string::npos);
  EXPECT_NE(plain.find("'A=it'\\''s'"), std::string::npos) << "env values are shell-quoted";
  EXPECT_EQ(plain.find("systemd-run"), std::string::npos);
  const std::string unit = StartCommand(*plan, r, true);
  EXPECT_NE(unit.find("systemd-run --unit=sparkctl-demo-rank2"), std::string::npos);
  EXPECT_NE(unit.find("LimitMEMLOCK=8192K"), std::string::npos);
  EXPECT_NE(unit.find("--setenv="), std::string::npos);
  const std::string stop = StopCommand(*plan, r);
  EXPECT_NE(stop.find("kill -TERM"), std::string::npos);
  EXPECT_NE(stop.find("kill -KILL"), std::string::npos);
  EXPECT_NE(stop.find("-lt 200"), std::string::npos) << "20 s deadline in 0.1 s ticks";
}

TEST(LaunchPlanTest, SafeNameKeepsFileNamesTame) {
  EXPECT_EQ(SafeName("demo"), "demo");
  EXPECT_EQ(SafeName("a b/../c"), "a_b____c");
  EXPECT_EQ(SafeName(""), "cluster");
}

}  // namespace
}  // namespace spark::up
