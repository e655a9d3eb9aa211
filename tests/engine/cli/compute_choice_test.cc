// The engine's "auto" choices: from the backend, the checkpoint's stored types and the family.
#include "engine/cli/compute_choice.h"

#include <gtest/gtest.h>

namespace spark::engine::cli {
namespace {

using backend::DType;

std::string Fixture(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

TEST(ComputeChoiceTest, AutoFollowsTheBackendTheCheckpointAndTheFamily) {
  auto cpu = ChooseCompute({.backend = "cpu", .model_dir = Fixture("qwen3-tiny")});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ(cpu->weights, DType::kF32);
  EXPECT_EQ(cpu->kv, DType::kF32);
  EXPECT_FALSE(cpu->cuda_graphs);
  // An fp32 checkpoint on cuda: bf16 (fp32 only when asked), graphs on.
  auto cuda = ChooseCompute({.backend = "cuda", .model_dir = Fixture("qwen3-tiny")});
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  EXPECT_EQ(cuda->weights, DType::kBF16);
  EXPECT_EQ(cuda->kv, DType::kBF16);
  EXPECT_TRUE(cuda->cuda_graphs);
  EXPECT_EQ(cuda->Describe(),
            "weights bf16 (auto: the checkpoint's F32 matrices; fp32 only when asked), KV cache "
            "bf16 (auto: as the weights), CUDA graphs on (default on cuda)");
  // FP8 matrices on cuda: fp8 (DeepSeek keeps its FP8 and FP4 matrices as released), but
  // deepseek_v4's row keeps an fp32 KV cache only.
  auto v4 = ChooseCompute({.backend = "cuda", .model_dir = Fixture("deepseek-v4-tiny/fp8")});
  ASSERT_TRUE(v4.ok()) << v4.status().message();
  EXPECT_EQ(v4->weights, DType::kFP8);
  EXPECT_EQ(v4->kv, DType::kF32);
  EXPECT_NE(v4->kv_why.find("deepseek_v4 keeps fp32"), std::string::npos) << v4->kv_why;
}

TEST(ComputeChoiceTest, ExplicitChoicesWin) {
  auto c = ChooseCompute({.backend = "cuda",
                          .model_dir = Fixture("qwen3-tiny"),
                          .weight_dtype = "fp32",
                          .kv_dtype = "bf16",
                          .cuda_graphs = false});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->weights, DType::kF32);
  EXPECT_EQ(c->kv, DType::kBF16);
  EXPECT_FALSE(c->cuda_graphs);
  EXPECT_EQ(c->graphs_why, "--no-cuda-graphs");
  EXPECT_FALSE(ChooseCompute({.backend = "cuda", .model_dir = Fixture("qwen3-tiny"),
                              .weight_dtype = "fp4"})
                   .ok());
}

}  // namespace
}  // namespace spark::engine::cli
