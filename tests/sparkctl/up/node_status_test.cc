#include "sparkctl/up/node_status.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

using testing::DemoProfile;
using testing::ProbeText;
using testing::Ring;

LaunchPlan Plan() { return *PlanLaunch(DemoProfile(), Ring(), {}); }

std::vector<NodeProbe> Probes(const std::vector<std::string>& texts) {
  std::vector<NodeProbe> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto p = ParseProbe("spark-" + std::to_string(i), texts[i]);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    out.push_back(p.ok() ? *p : NodeProbe{});
  }
  return out;
}

std::vector<std::string> AllReady() {
  return {ProbeText(0, 100, 'S', "ready", 1000, true, 200), ProbeText(1, 101, 'S', "ready"),
          ProbeText(2, 102, 'R', "ready"), ProbeText(3, 103, 'S', "ready")};
}

TEST(RankStatusTest, ParsesEverySection) {
  auto p = ParseProbe("spark-0", ProbeText(0, 4242, 'S', "loading", 1000, true, 503,
                                           "@@metrics\nvllm:generation_tokens_total{m=\"x\"} 7\n"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kernel, "6.17.0-1031-nvidia");
  EXPECT_EQ(p->mem_total_kib, 127601864);
  EXPECT_EQ(p->mem_available_kib, 100000000);
  EXPECT_EQ(p->links.at("enp1s0f0np0"), "up");
  EXPECT_EQ(p->links.at("enP2p1s0f1np1"), "absent");
  EXPECT_DOUBLE_EQ(p->now, 1002.5);
  ASSERT_EQ(p->ranks.size(), 1u);
  EXPECT_EQ(p->ranks[0].pid, 4242);
  EXPECT_EQ(p->ranks[0].proc_state, 'S');
  EXPECT_TRUE(p->ranks[0].Alive());
  EXPECT_EQ(p->ranks[0].status.phase, "loading");
  EXPECT_DOUBLE_EQ(p->ranks[0].status.progress, 0.5);
  EXPECT_EQ(p->ranks[0].log_tail.size(), 2u);
  EXPECT_EQ(p->ready_http, 503);
  ASSERT_EQ(p->metrics.size(), 1u);
  EXPECT_EQ(MetricValue(p->metrics[0], "vllm:generation_tokens_total"), 7.0);
}

TEST(RankStatusTest, TruncatedProbeIsAnError) {
  std::string text = ProbeText(0, 1, 'S', "ready");
  text.resize(text.find("@@end"));
  EXPECT_EQ(ParseProbe("spark-0", text).status().code(), StatusCode::kInvalidArgument);
}

TEST(RankStatusTest, StatusFileTimesAsNumberOrIso) {
  EXPECT_DOUBLE_EQ(ParseEngineStatus(R"({"phase":"ready","updated":12.5})")->updated, 12.5);
  EXPECT_DOUBLE_EQ(ParseEngineStatus(R"({"phase":"ready","updated":"1970-01-01T00:01:40Z"})")->updated,
                   100);
  EXPECT_FALSE(ParseEngineStatus("[1,2]").ok());
}

TEST(RankStatusTest, AllRanksReadyAndEndpointUpIsReady) {
  ClusterHealth h = Assess(Plan(), Probes(AllReady()));
  EXPECT_EQ(h.health, Health::kReady);
  EXPECT_TRUE(h.endpoint_ready);
  EXPECT_TRUE(h.reason.empty());
}

TEST(RankStatusTest, ReadyRanksButNoEndpointYetIsStarting) {
  auto texts = AllReady();
  texts[0] = ProbeText(0, 100, 'S', "ready", 1000, true, 0);
  EXPECT_EQ(Assess(Plan(), Probes(texts)).health, Health::kStarting);
  texts[0] = ProbeText(0, 100, 'S', "warming", 1000, true, 503);
  EXPECT_EQ(Assess(Plan(), Probes(texts)).health, Health::kStarting);
}

TEST(RankStatusTest, DeadRankIsDegradedNamingItAndItsLastLogLines) {
  auto texts = AllReady();
  texts[2] = ProbeText(2, 102, 0, "ready");  // pidfile names a process that is gone
  ClusterHealth h = Assess(Plan(), Probes(texts));
  EXPECT_EQ(h.health, Health::kDegraded);
  EXPECT_NE(h.reason.find("rank 2 (spark-2)"), std::string::npos) << h.reason;
  EXPECT_NE(h.reason.find("line two"), std::string::npos) << h.reason;
  EXPECT_EQ(h.ranks[2].phase, "exited");
}

TEST(RankStatusTest, StoppedProcessIsHung) {
  auto texts = AllReady();
  texts[1] = ProbeText(1, 101, 'T', "ready");
  ClusterHealth h = Assess(Plan(), Probes(texts));
  EXPECT_EQ(h.health, Health::kDegraded);
  EXPECT_EQ(h.ranks[1].phase, "hung");
  EXPECT_NE(h.reason.find("rank 1"), std::string::npos);
}

TEST(RankStatusTest, StaleHeartbeatCountsOnlyOnceSeen) {
  auto texts = AllReady();
  texts[3] = ProbeText(3, 103, 'S', "ready", 990);  // node clock 1002.5: 12.5 s old
  EXPECT_EQ(Assess(Plan(), Probes(texts)).health, Health::kReady);
  ClusterHealth h = Assess(Plan(), Probes(texts), {.heartbeat_seen = true});
  EXPECT_EQ(h.health, Health::kDegraded);
  EXPECT_NE(h.reason.find("no heartbeat for 12 s"), std::string::npos) << h.reason;
}

// A status file of a ready rank with liveness fields (node clock 1002.5).
std::string LiveText(int rank, bool busy, double progressed, const std::string& guard = "") {
  std::string t = ProbeText(rank, 100 + rank, 'R', "ready", 1002, rank == 0, 200);
  const std::string old = "\"updated\":1002.000000}";
  std::string live = "\"updated\":1002.000000,\"steps\":41,\"tokens\":9000,\"busy\":" +
                     std::string(busy ? "true" : "false") +
                     ",\"progressed\":" + std::to_string(progressed) +
                     ",\"memory\":{\"available_bytes\":2147483648" +
                     (guard.empty() ? "" : ",\"guard\":\"" + guard + "\"") + "}}";
  t.replace(t.find(old), old.size(), live);
  return t;
}

TEST(RankStatusTest, BusyRankWhoseCountersMoveIsNotHung) {
  auto texts = AllReady();
  texts[2] = LiveText(2, /*busy=*/true, /*progressed=*/1001.0);  // a prefill chunk just ended
  ClusterHealth h = Assess(Plan(), Probes(texts), {.heartbeat_seen = true,
                                                   .progress_timeout_s = 5});
  EXPECT_EQ(h.health, Health::kReady) << h.reason;
  EXPECT_EQ(h.ranks[2].steps, 41u);
  EXPECT_TRUE(h.ranks[2].busy);
}

TEST(RankStatusTest, BusyRankWithoutProgressForTheTimeoutIsHung) {
  auto texts = AllReady();
  texts[2] = LiveText(2, /*busy=*/true, /*progressed=*/990.0);  // 12.5 s in one step
  ClusterHealth h = Assess(Plan(), Probes(texts), {.heartbeat_seen = true,
                                                   .progress_timeout_s = 10});
  EXPECT_EQ(h.health, Health::kDegraded);
  EXPECT_EQ(h.ranks[2].phase, "hung");
  EXPECT_NE(h.reason.find("rank 2 (spark-2): 12 s in one step with no progress (41 steps, 9000 "
                          "tokens)"),
            std::string::npos)
      << h.reason;
  // An idle rank (not busy) waits for work as long as it likes.
  texts[2] = LiveText(2, /*busy=*/false, /*progressed=*/100.0);
  EXPECT_EQ(Assess(Plan(), Probes(texts), {.heartbeat_seen = true, .progress_timeout_s = 10})
                .health,
            Health::kReady);
}

TEST(RankStatusTest, MemoryGuardOfRankZeroIsShown) {
  auto texts = AllReady();
  texts[0] = LiveText(0, false, 1000, "no-admit");
  auto probes = Probes(texts);
  ClusterHealth h = Assess(Plan(), probes);
  EXPECT_EQ(h.memory_guard, "no-admit");
  const std::string table = RenderStatus(Plan(), probes, h);
  EXPECT_NE(table.find("memory    guard no-admit; spark-0 2.0 GiB available"), std::string::npos)
      << table;
  auto j = StatusJson(Plan(), probes, h);
  EXPECT_EQ(j["memory_guard"], "no-admit");
  EXPECT_EQ(j["ranks"][0]["memory_available_bytes"], 2147483648);
  EXPECT_EQ(j["ranks"][0]["steps"], 41);
}

TEST(RankStatusTest, FailedPhaseAndUnreachableNodeAreDegraded) {
  auto texts = AllReady();
  texts[1] = ProbeText(1, 101, 'S', "failed");
  EXPECT_EQ(Assess(Plan(), Probes(texts)).health, Health::kDegraded);
  texts[3] = ProbeText(3, 103, 0, "ready");  // the cause: rank 1 only noticed rank 3 was gone
  EXPECT_NE(Assess(Plan(), Probes(texts)).reason.find("rank 3 (spark-3)"), std::string::npos);
  auto probes = Probes(AllReady());
  probes[3].reachable = UnavailableError("spark-3: unreachable: connection refused");
  ClusterHealth h = Assess(Plan(), probes);
  EXPECT_EQ(h.health, Health::kDegraded);
  EXPECT_NE(h.reason.find("connection refused"), std::string::npos);
}

TEST(RankStatusTest, NothingStartedIsDown) {
  std::vector<std::string> texts;
  for (int r = 0; r < 4; ++r) texts.push_back(ProbeText(r, 0, 0, ""));
  ClusterHealth h = Assess(Plan(), Probes(texts));
  EXPECT_EQ(h.health, Health::kDown);
  EXPECT_EQ(h.ranks[0].phase, "not started");
}

TEST(RankStatusTest, TokensPerSecondFromTwoMetricSamples) {
  auto texts = AllReady();
  texts[0] = ProbeText(0, 100, 'S', "ready", 1000, true, 200,
                       "@@metrics\nvllm:generation_tokens_total 40\n"
                       "@@metrics\nvllm:generation_tokens_total 52\n");
  ClusterHealth h = Assess(Plan(), Probes(texts));
  ASSERT_TRUE(h.tokens_per_second.has_value());
  EXPECT_DOUBLE_EQ(*h.tokens_per_second, 12);
  EXPECT_FALSE(MetricValue("vllm:generation_tokens_total_x 3\n", "vllm:generation_tokens_total"));
}

TEST(RankStatusTest, RendersStatusTableAndJson) {
  auto probes = Probes(AllReady());
  probes[3].reachable = UnavailableError("spark-3: unreachable");
  ClusterHealth h = Assess(Plan(), probes);
  const std::string table = RenderStatus(Plan(), probes, h);
  EXPECT_NE(table.find("spark-0    ok        6.17.0-1031-nvidia   2/4    0    ready       100"),
            std::string::npos) << table;
  EXPECT_NE(table.find("spark-3    UNREACH"), std::string::npos) << table;
  EXPECT_NE(table.find("DEGRADED: rank 3 (spark-3)"), std::string::npos) << table;
  auto j = StatusJson(Plan(), probes, h);
  EXPECT_EQ(j["schema"], "sparkctl-status/v1");
  EXPECT_EQ(j["health"], "degraded");
  EXPECT_EQ(j["nodes"][3]["reachable"], false);
  EXPECT_EQ(j["ranks"][1]["pid"], 101);
  const std::string progress = RenderProgress(Assess(Plan(), Probes({ProbeText(0, 1, 'S', "loading")})));
  EXPECT_NE(progress.find("rank 0 spark-0      loading      50%"), std::string::npos) << progress;
}

TEST(RankStatusTest, ShowsTheTlsFingerprintOrTheClearTextWarning) {
  auto probes = Probes(AllReady());
  LaunchPlan tls = Plan();
  tls.endpoint = "https://127.0.0.1:8000";
  tls.tls_fingerprint = "AB:CD";
  const std::string table = RenderStatus(tls, probes, Assess(tls, probes));
  EXPECT_NE(table.find("endpoint  https://127.0.0.1:8000 on spark-0"), std::string::npos) << table;
  EXPECT_NE(table.find("tls       SHA-256 AB:CD\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("clear text"), std::string::npos) << table;
  EXPECT_EQ(StatusJson(tls, probes, Assess(tls, probes))["tls_fingerprint"], "AB:CD");
  LaunchPlan open = Plan();
  open.clear_text = true;
  const std::string warned = RenderStatus(open, probes, Assess(open, probes));
  EXPECT_NE(warned.find("the API key travels in clear text"), std::string::npos) << warned;
  auto j = StatusJson(open, probes, Assess(open, probes));
  EXPECT_EQ(j["clear_text"], true);
  EXPECT_TRUE(j["tls_fingerprint"].is_null());
}

TEST(RankStatusTest, HttpsProbesOnTheNodeSkipVerification) {
  LaunchPlan tls = Plan();
  tls.endpoint = "https://127.0.0.1:8000";
  const std::string probe = ProbeCommand(tls, "spark-0", true, 1, 5);
  EXPECT_NE(probe.find("--max-time 2 -k 'https://127.0.0.1:8000/ready'"), std::string::npos)
      << probe;
  EXPECT_EQ(ProbeCommand(Plan(), "spark-0", true, 1, 5).find(" -k "), std::string::npos);
}

// The monitor's probe (no node extras) leaves out the link counters (ethtool) and nvidia-smi but
// keeps what Assess reads; run here by bash, it parses, with no link details and no GPU.
TEST(RankStatusTest, MonitorProbeLeavesOutLinkCountersAndTheGpu) {
  const std::string full = ProbeCommand(Plan(), "spark-0", true, 0, 5, true);
  const std::string light = ProbeCommand(Plan(), "spark-0", true, 0, 5, false);
  EXPECT_NE(full.find("nvidia-smi"), std::string::npos);
  EXPECT_NE(full.find("ethtool"), std::string::npos);
  for (const char* gone : {"nvidia-smi", "ethtool", "@@linkinfo", "@@gpu"}) {
    EXPECT_EQ(light.find(gone), std::string::npos) << gone;
  }
  for (const char* kept : {"@@kernel", "@@meminfo", "@@links", "@@now", "@@rank 0", "@@status 0",
                           "@@log 0", "@@ready", "@@end"}) {
    EXPECT_NE(light.find(kept), std::string::npos) << kept;
  }
  const std::string script = ::testing::TempDir() + "/light_probe.sh";
  std::ofstream(script) << light << "\n";
  FILE* pipe = popen(("bash " + script + " 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  pclose(pipe);
  std::remove(script.c_str());
  auto parsed = ParseProbe("spark-0", out);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << out;
  EXPECT_GT(parsed->mem_total_kib, 0);
  EXPECT_GT(parsed->now, 0);
  EXPECT_TRUE(parsed->link_details.empty());
  EXPECT_FALSE(parsed->gpu.has_value());
}

}  // namespace
}  // namespace spark::up
