// Prompt scoring on the CUDA backend: every prompt token's log-probability equals Hugging
// Face's teacher-forced log_softmax on the Qwen3 dense and MoE and DeepSeek V4 / V4.1 fixtures
// (the CPU test's references and measure, tests/engine/model/prompt_scoring_util.h), with the
// prompts prefilled in chunks, a cached second round, max_tokens 0 and 1, and decode graphs on
// (the scored steps run as logits plans beside them).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "kernels/cuda_check.h"
#include "tests/engine/model/prompt_scoring_util.h"

namespace spark::engine::model {
namespace {

using namespace scoring_testing;

class CudaPromptLogprobsTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaPromptLogprobsTest, MatchesTransformersTeacherForcedLogSoftmax) {
  const std::vector<Case> cases = LoadCases(GetParam());
  auto gpu = backend::cuda::CudaBackend::Create({});
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  auto model = LoadModel(FixtureDir(GetParam()), **gpu, nullptr, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto runner = ModelStepRunner::Create(model->get(), **gpu, kBlocks, kBlockSize,
                                        /*return_logits=*/true, /*decode_graphs=*/true);
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  ExpectMatches(cases, Score(runner->get(), cases));
  EXPECT_TRUE((*gpu)->status().ok()) << (*gpu)->status().message();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPromptLogprobsTest,
                         testing::Values("qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny",
                                         "deepseek-v41-tiny"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spark::engine::model
