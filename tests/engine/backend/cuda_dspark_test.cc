// DSpark drafting on the CUDA backend (engine/model/deepseek_v41/dspark.h over CudaBackend and
// CudaDeepseekOps): on the dspark fixture in fp32, every draft the engine makes equals the torch
// reference's (one case at a time, all cases in one batch so a step's blocks share a draft
// forward, and with the prompt prefilled in 5-token chunks), and greedy output with DSpark
// equals greedy output without it on the GPU, with decode graphs on (verify and draft steps run
// outside them).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_fixture_rank.h"
#include "tests/engine/model/dspark_test_util.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model {
namespace {

using namespace speculative_testing;
using dspark_testing::kFixture;

using fixture_testing::GpuRank;

std::unique_ptr<GpuRank> LoadOnGpu(bool draft) {
  return fixture_testing::LoadOnGpu(kFixture,
                                    draft ? dspark_testing::WithDraft() : ModelOptions());
}

class CudaDsparkTest : public testing::Test {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaDsparkTest, DraftsAreTheReferences) {
  for (const auto& [budget, together] : {std::pair{256, false}, {256, true}, {5, false}}) {
    auto rank = LoadOnGpu(/*draft=*/true);
    ASSERT_NE(rank, nullptr);
    ASSERT_TRUE(rank->runner->has_draft_model());
    SCOPED_TRACE("budget " + std::to_string(budget) + (together ? ", one batch" : ""));
    dspark_testing::ExpectReferenceDrafts(rank->runner.get(), budget, together);
    EXPECT_TRUE(rank->gpu->status().ok()) << rank->gpu->status().message();
  }
}

TEST_F(CudaDsparkTest, GreedyWithDsparkIsGreedyWithout) {
  auto plain_rank = LoadOnGpu(/*draft=*/false);
  ASSERT_NE(plain_rank, nullptr);
  const RunResult plain = Generate(plain_rank->runner.get(), Options(0, false), nullptr);
  auto rank = LoadOnGpu(/*draft=*/true);
  ASSERT_NE(rank, nullptr);
  const RunResult spec =
      Generate(rank->runner.get(), dspark_testing::DsparkOptions(4, 16), nullptr);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_drafts, 0u);
  EXPECT_GT(spec.stats.prefix_hits, 0u);
  EXPECT_TRUE(rank->gpu->status().ok()) << rank->gpu->status().message();
}

}  // namespace
}  // namespace spark::engine::model
