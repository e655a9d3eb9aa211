// Speculative decoding on the CUDA backend: the engine with the n-gram drafter, and with an
// oracle that spoils part of each draft, gives token for token the greedy output of the same
// engine without drafts, on the Qwen3 dense and MoE fixtures and the DeepSeek V4 and V4.1 ones
// (V4.1 also in its released FP8/FP4 types), through argmax and logits plans,
// with decode graphs and launches ahead on (verify steps run outside graphs and must drop or
// leave alone what was launched ahead), chunked prefill and prefix-cache hits.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>

#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_fixture_rank.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model {
namespace {

using namespace speculative_testing;

using fixture_testing::LoadOnGpu;

class CudaSpeculativeTest : public testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaSpeculativeTest, GreedyWithDraftsIsGreedyWithout) {
  const auto& [fixture, argmax] = GetParam();
  auto plain_rank = LoadOnGpu(fixture);
  ASSERT_NE(plain_rank, nullptr);
  const RunResult plain = Generate(plain_rank->runner.get(), Options(0, argmax), nullptr);
  ASSERT_EQ(plain.tokens.size(), 8u);
  for (const auto& t : plain.tokens) EXPECT_EQ(t.size(), 20u);
  EXPECT_EQ(plain.tokens[4], plain.tokens[0]) << "a prefix-cache hit changed the output";

  auto ngram_rank = LoadOnGpu(fixture);
  ASSERT_NE(ngram_rank, nullptr);
  const RunResult ngram = Generate(ngram_rank->runner.get(), Options(4, argmax), nullptr);
  EXPECT_EQ(ngram.tokens, plain.tokens);
  EXPECT_GT(ngram.stats.spec_drafts, 0u);

  auto oracle_rank = LoadOnGpu(fixture);
  ASSERT_NE(oracle_rank, nullptr);
  OracleDrafter oracle(FullSequences(plain));
  const RunResult spec = Generate(oracle_rank->runner.get(), Options(4, argmax), &oracle);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
  EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps) << "accepted drafts save steps";
  EXPECT_TRUE(oracle_rank->gpu->status().ok()) << oracle_rank->gpu->status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CudaSpeculativeTest,
    testing::Combine(testing::Values("qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny",
                                     "deepseek-v41-tiny", "deepseek-v41-tiny/release"),
                     testing::Bool()),
    [](const auto& info) {
      std::string n = std::get<0>(info.param);
      std::replace(n.begin(), n.end(), '-', '_');
      std::replace(n.begin(), n.end(), '/', '_');
      return n + (std::get<1>(info.param) ? "_ArgMaxPlans" : "_LogitsPlans");
    });

}  // namespace
}  // namespace spark::engine::model
