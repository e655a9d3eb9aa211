// Prompt scoring (SamplingParams::prompt_logprobs) over the real Qwen3 and DeepSeek-V4 tiny
// fixtures on the CPU backend: every prompt token's log-probability equals Hugging Face's teacher-forced
// log_softmax (tests/fixtures/models/*/expected.json, `prompt_logprobs`, made by
// scripts/fixtures/make_model_fixtures.py) within the greedy tests' measure, max|ours - ref| /
// max|ref| < 1e-4 — with prompts prefilled in chunks, a second round whose prefix is cached
// (scored prompts recompute it), max_tokens 0 (score only) and 1, and at TP=2 (two ranks in
// threads, the vocabulary split across them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/communicator.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/plan_broadcast.h"
#include "tests/engine/model/prompt_scoring_util.h"

namespace spark::engine::model {
namespace {

using namespace scoring_testing;

using fixture_testing::Load;
using fixture_testing::OneRank;

class PromptLogprobsTest : public testing::TestWithParam<std::string> {};

TEST_P(PromptLogprobsTest, MatchesTransformersTeacherForcedLogSoftmax) {
  const std::vector<Case> cases = LoadCases(GetParam());
  auto rank = Load(GetParam());
  ASSERT_NE(rank, nullptr);
  ExpectMatches(cases, Score(rank->runner.get(), cases));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PromptLogprobsTest,
                         testing::Values("qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny",
                                         "deepseek-v41-tiny"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param == "qwen3-tiny"         ? "Dense"
                                  : info.param == "qwen3-moe-tiny"   ? "Moe"
                                  : info.param == "deepseek-v4-tiny" ? "DeepseekV4"
                                                                     : "DeepseekV41";
                         });

// TP=2: each rank holds half of the vocabulary's logits; the rows rank 0 scores are the
// gathered full rows, so the log-softmax runs over the whole vocabulary.
TEST(PromptLogprobsTpTest, TwoRanksMatchTransformers) {
  const std::vector<Case> cases = LoadCases("qwen3-tiny");
  auto group = comm::CreateLocalGroup(2, std::chrono::seconds(30));
  std::unique_ptr<OneRank> ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = Load("qwen3-tiny", group[r].get(), ModelOptions{{r, 2}});
    ASSERT_NE(ranks[r], nullptr);
  }
  Status worker;
  std::thread t([&] { worker = runtime::RunWorkerLoop(*group[1], *ranks[1]->runner); });
  runtime::BroadcastingModelRunner rank0(group[0].get(), ranks[0]->runner.get());
  const auto scores = Score(&rank0, cases);
  EXPECT_TRUE(rank0.Shutdown().ok());
  t.join();
  EXPECT_TRUE(worker.ok()) << worker.ToString();
  ExpectMatches(cases, scores);
}

}  // namespace
}  // namespace spark::engine::model
