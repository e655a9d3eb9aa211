// sparkctl's side of the memory plan against the built spark-engine: the profile's fields become
// the engine's flags, its JSON is read, and a node that does not fit is a problem at the profile
// key to turn; `profile check` refuses a profile whose plan leaves less than the floor.
#include "sparkctl/profile/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sparkctl/profile/profile_yaml.h"

namespace spark::profile {
namespace {

const std::string kEngine = std::string(SPARK_BINARY_DIR) + "/bin/spark-engine";
const std::string kTiny = std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/qwen3-tiny";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Profile Tiny() {
  Profile p;
  p.name = "tiny";
  p.source_file = "tiny.yaml";
  p.model.repository = "sparkctl/qwen3-tiny-demo";
  p.model.revision = "0000000000000000000000000000000000000001";
  p.model.path = kTiny;
  ApplyDefaults(&p);
  p.engine.backend = "cpu";
  p.engine.tp = 1;
  p.engine.context_length = 256;
  p.engine.max_running_requests = 4;
  p.engine.chunked_prefill = 64;
  p.engine.kv_cache.tokens = 4096;
  return p;
}

bool Has(const std::vector<std::string>& a, const std::string& flag, const std::string& value) {
  auto it = std::find(a.begin(), a.end(), flag);
  return it != a.end() && it + 1 != a.end() && *(it + 1) == value;
}

TEST(ProfileMemoryPlanTest, ProfileFieldsBecomeTheEnginesFlags) {
  Profile p = Tiny();
  p.engine.memory_guard.startup_floor_gib = 6;
  p.env["NCCL_BUFFSIZE"] = "1048576";
  const auto a = PlanArgs(p, kTiny, {{"spark-0", static_cast<int64_t>(100 * kGiB)}});
  EXPECT_TRUE(Has(a, "--model", kTiny));
  EXPECT_TRUE(Has(a, "--backend", "cpu"));
  EXPECT_TRUE(Has(a, "--max-model-len", "256"));
  EXPECT_TRUE(Has(a, "--max-num-seqs", "4"));
  EXPECT_TRUE(Has(a, "--max-batched-tokens", "64"));
  EXPECT_TRUE(Has(a, "--kv-tokens", "4096"));
  EXPECT_TRUE(Has(a, "--memory-floor-gib", "6"));
  EXPECT_TRUE(Has(a, "--nccl-buffsize", "1048576"));
  EXPECT_TRUE(Has(a, "--node", "spark-0=100"));
  EXPECT_TRUE(Has(PlanArgs(p, "/x/config.json", {}), "--config", "/x/config.json"));
  EXPECT_EQ(std::find(a.begin(), a.end(), "--num-speculative-tokens"), a.end());
  p.engine.speculative.method = "ngram";
  p.engine.speculative.num_speculative_tokens = 4;
  EXPECT_TRUE(Has(PlanArgs(p, kTiny, {}), "--num-speculative-tokens", "4"));
  EXPECT_TRUE(Has(PlanArgs(p, kTiny, {}), "--speculative-method", "ngram"));
  // dspark's draft stack is the engine's to count: the method must reach it.
  p.engine.speculative.method = "dspark";
  EXPECT_TRUE(Has(PlanArgs(p, kTiny, {}), "--speculative-method", "dspark"));
}

TEST(ProfileMemoryPlanTest, TheEnginesPlanFitsABigNodeAndNotASmallOne) {
  Profile p = Tiny();
  p.engine.kv_cache.tokens = 1 << 20;  // 768 B a token: 768 MiB of KV cache
  auto plan = QueryPlan(kEngine, PlanArgs(p, kTiny,
                                          {{"big", static_cast<int64_t>(20 * kGiB)},
                                           {"small", static_cast<int64_t>(5.5 * kGiB)}}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->family, "qwen3");
  EXPECT_EQ(plan->kv_bytes_per_token, 768);
  ASSERT_EQ(plan->nodes.size(), 2u);
  EXPECT_TRUE(plan->nodes[0].ok);
  EXPECT_FALSE(plan->nodes[1].ok);
  EXPECT_FALSE(plan->ok);
  EXPECT_EQ(plan->nodes[1].knob, "kv_tokens");
  FieldErrors errors;
  ValidateAgainstPlan(p, *plan, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "engine.kv_cache.tokens");
  const std::string& m = errors.errors()[0].message;
  EXPECT_NE(m.find("on small"), std::string::npos) << m;
  EXPECT_NE(m.find("below engine.memory_guard.startup_floor_gib (5)"), std::string::npos) << m;
  // What fits is what the engine said: about 0.5 GiB less the rest, in KV tokens.
  EXPECT_NE(m.find("a KV cache of at most " +
                   std::to_string(static_cast<int64_t>(plan->nodes[1].knob_value)) + " tokens"),
            std::string::npos)
      << m;
  EXPECT_GT(plan->nodes[1].knob_value, 0);
  EXPECT_LT(plan->nodes[1].knob_value, 1 << 20);
  const std::string text = RenderPlan(p, *plan);
  EXPECT_NE(text.find("small"), std::string::npos);
  EXPECT_NE(text.find("NO"), std::string::npos) << text;
}

TEST(ProfileMemoryPlanTest, AFractionThatEatsTheFloorNamesTheFraction) {
  Profile p = Tiny();
  p.engine.kv_cache.tokens.reset();
  p.engine.kv_cache.memory_fraction = 0.9;
  auto plan = QueryPlan(kEngine, PlanArgs(p, kTiny, {{"n", static_cast<int64_t>(8 * kGiB)}}));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  FieldErrors errors;
  ValidateAgainstPlan(p, *plan, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "engine.kv_cache.memory_fraction");
  EXPECT_NE(errors.errors()[0].message.find("lower it to 0."), std::string::npos)
      << errors.errors()[0].message;
}

TEST(ProfileMemoryPlanTest, WhatIfReplacesFieldsAndValidates) {
  Profile p = Tiny();
  const Status ok = ApplyWhatIf({.context = 128, .concurrency = 2, .kv_dtype = "bf16"}, &p);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(p.engine.context_length, 128);
  EXPECT_EQ(p.engine.max_running_requests, 2);
  EXPECT_EQ(p.engine.kv_cache.dtype, KvCacheDtype::kBf16);
  const Status bad = ApplyWhatIf({.kv_dtype = "int3"}, &p);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("int3"), std::string::npos);
}

TEST(ProfileMemoryPlanTest, AnEngineErrorIsReported) {
  Profile p = Tiny();
  auto plan = QueryPlan(kEngine, PlanArgs(p, "/nonexistent/checkpoint", {}));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("/nonexistent/checkpoint/config.json"), std::string::npos)
      << plan.status().message();
}

// `profile check` runs the plan where it has the checkpoint: a KV budget that leaves less than
// the floor on a Spark is a problem at its line.
TEST(ProfileMemoryPlanTest, ProfileCheckRefusesAPlanBelowTheFloor) {
  const std::string file = ::testing::TempDir() + "/plan_check_profile.yaml";
  std::ofstream(file) << "schema: sparkctl-profile/v1\nname: too-big\nmodel:\n"
                         "  repository: sparkctl/qwen3-tiny-demo\n"
                         "  revision: 0000000000000000000000000000000000000001\n"
                         "  path: "
                      << kTiny
                      << "\ntopology:\n  kind: single\n  nodes: 1\n"
                         "engine:\n  backend: cpu\n  tp: 1\n  context_length: 256\n"
                         "  kv_cache:\n    tokens: 200000000\n";
  auto caps = QueryEngine(kEngine);
  ASSERT_TRUE(caps.ok()) << caps.status().message();
  const ProfileCheck check = CheckProfileFile(file, &*caps);
  ASSERT_FALSE(check.ok());
  bool found = false;
  for (const YamlProblem& problem : check.problems) {
    if (problem.key != "engine.kv_cache.tokens") continue;
    found = true;
    EXPECT_EQ(problem.location.line, 15);
    EXPECT_NE(problem.message.find("the memory plan leaves"), std::string::npos) << problem.message;
  }
  EXPECT_TRUE(found) << check.ToStatus().message();
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace spark::profile
