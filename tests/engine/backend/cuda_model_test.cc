// The tiny Qwen3 and Qwen3-MoE fixtures on CudaBackend: prompt logits against transformers'
// (tests/fixtures/models/*/expected.json) and against CpuBackend, then greedy decode of every
// prompt together, one token per step, which must give transformers' tokens.
// Tolerance: max|ours - ref| / max|ref| < 1e-4, as for the CPU backend (both are fp32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_model_util.h"

namespace spark::engine::model {
namespace {

using namespace testing;

class CudaModelTest : public CudaFixtureTest {};

TEST_P(CudaModelTest, MatchesTransformersAndCpuBackend) {
  backend::cpu::CpuBackend cpu(2);
  const ModelRun g = RunModel(dir, *gpu, cases, eos);
  const ModelRun c = RunModel(dir, cpu, cases, eos);
  ASSERT_TRUE(gpu->Synchronize().ok()) << gpu->status().message();
  ASSERT_EQ(g.prefill_logits.size(), c.prefill_logits.size());
  ASSERT_FALSE(g.prefill_logits.empty());
  const size_t vocab = cases[0].logits[0].size();
  size_t row = 0;
  double worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const double err = RelError(&g.prefill_logits[row * vocab], cases[i].logits);
    EXPECT_LT(err, kMaxRelError) << GetParam() << " case " << i << " vs transformers";
    worst = std::max(worst, err);
    row += cases[i].prompt.size();
    EXPECT_EQ(g.tokens[i], cases[i].greedy) << GetParam() << " case " << i;
    EXPECT_EQ(g.tokens[i], c.tokens[i]) << GetParam() << " case " << i << " vs cpu";
  }
  double diff = 0, top = 0;
  for (size_t i = 0; i < g.prefill_logits.size(); ++i) {
    top = std::max(top, std::fabs(double{c.prefill_logits[i]}));
    diff = std::max(diff, std::fabs(double{g.prefill_logits[i]} - c.prefill_logits[i]));
  }
  EXPECT_LT(diff / top, kMaxRelError) << "vs cpu backend";
  std::printf("%s on cuda: max relative logit error %.3g vs transformers, %.3g vs cpu\n",
              GetParam().c_str(), worst, diff / top);
}

// Greedy decode through ForwardArgMax (argmax on the GPU), eagerly and — for the dense model —
// in CUDA graphs: one capture per live-batch size, then replays with new inputs. Both must give
// transformers' tokens.
TEST_P(CudaModelTest, ArgMaxAndGraphDecodeGiveTransformersTokens) {
  DecodeOptions eager{.argmax = true};
  const ModelRun e = RunModel(dir, *gpu, cases, eos, nullptr, {}, eager);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(e.tokens[i], cases[i].greedy) << i;
  if (GetParam() != "qwen3-tiny") return;  // MoE layers stay eager
  int steps = 0;
  DecodeOptions graph{.argmax = true, .before_step = [&](int live) {
                        // The first decode step runs eagerly (it builds the RoPE tables).
                        if (steps++ == 0) return;
                        Status s = gpu->BeginGraph("test-b" + std::to_string(live), kBlocksPerSeq);
                        EXPECT_TRUE(s.ok()) << s.message();
                      }};
  const ModelRun g = RunModel(dir, *gpu, cases, eos, nullptr, {}, graph);
  ASSERT_TRUE(gpu->status().ok()) << gpu->status().message();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(g.tokens[i], cases[i].greedy) << i;
  EXPECT_GE(gpu->graph_count(), 1u);
  EXPECT_LT(gpu->graph_count(), static_cast<size_t>(steps));  // replays happened
}

// Greedy steps launched ahead (Model::LaunchArgMax: each step's ids go to the next step's
// embedding on the GPU, two steps in flight), eagerly and — for the dense model — in CUDA graphs,
// where the two steps in flight take the two host areas (a graph each). All must give
// transformers' tokens.
TEST_P(CudaModelTest, LaunchedStepsGiveTransformersTokens) {
  auto expect = [&](const std::vector<std::vector<int32_t>>& got, const char* how) {
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_GE(got[i].size(), 4u) << how;
      const std::vector<int32_t> want(cases[i].greedy.begin(),
                                      cases[i].greedy.begin() + got[i].size());
      EXPECT_EQ(got[i], want) << how << " case " << i;
    }
  };
  expect(RunLaunched(dir, *gpu, cases), "eager");
  if (GetParam() != "qwen3-tiny") return;  // MoE layers stay eager
  const size_t graphs_before = gpu->graph_count();
  expect(RunLaunched(dir, *gpu, cases,
                     [&](size_t step) {
                       if (step == 1) return;  // eager: builds the RoPE tables
                       Status s = gpu->BeginGraph("launched", kBlocksPerSeq);
                       EXPECT_TRUE(s.ok()) << s.message();
                     }),
         "graphs");
  ASSERT_TRUE(gpu->status().ok()) << gpu->status().message();
  EXPECT_EQ(gpu->graph_count() - graphs_before, 2u);  // one per host area, then replays
}

// bf16 Linear weights (the fp32 fixtures rounded): logits within bf16 tolerance of
// transformers' fp32 ones, on the GPU and on the CPU backend's widening path.
TEST_P(CudaModelTest, Bf16WeightsWithinBf16Tolerance) {
  ModelOptions options;
  options.weight_dtype = backend::DType::kBF16;
  const ModelRun g = RunModel(dir, *gpu, cases, eos, nullptr, options);
  ASSERT_TRUE(gpu->Synchronize().ok()) << gpu->status().message();
  ASSERT_FALSE(g.prefill_logits.empty());
  const size_t vocab = cases[0].logits[0].size();
  size_t row = 0;
  double worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    worst = std::max(worst, RelError(&g.prefill_logits[row * vocab], cases[i].logits));
    row += cases[i].prompt.size();
  }
  EXPECT_LT(worst, 3e-2);
  EXPECT_GT(worst, 1e-6);  // the weights really were rounded
  std::printf("%s bf16 weights on cuda: max relative logit error %.3g\n", GetParam().c_str(),
              worst);
}

// fp8 Linear weights (quantised per 128 x 128 block on load, the same bytes on both backends):
// the GPU's prompt logits (GEMMs over the weights widened to bf16 and bf16 activations) within
// bf16 tolerance of the CPU backend's (fp32 over the dequantised values) for the dense fixture.
// The MoE fixture's router flips expert choices under that noise (see the CPU backend's fp8
// test), so there only finite logits and a full decode are required.
TEST_P(CudaModelTest, Fp8WeightsMatchTheCpuBackendsFp8Weights) {
  backend::cpu::CpuBackend cpu(2);
  ModelOptions options;
  options.weight_dtype = backend::DType::kFP8;
  options.kv_dtype = backend::KvDTypeFor(options.weight_dtype);
  const ModelRun g = RunModel(dir, *gpu, cases, eos, nullptr, options);
  const ModelRun c = RunModel(dir, cpu, cases, eos, nullptr, options);
  ASSERT_TRUE(gpu->Synchronize().ok()) << gpu->status().message();
  ASSERT_EQ(g.prefill_logits.size(), c.prefill_logits.size());
  ASSERT_FALSE(g.prefill_logits.empty());
  double diff = 0, top = 0;
  for (size_t i = 0; i < g.prefill_logits.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g.prefill_logits[i])) << i;
    top = std::max(top, std::fabs(double{c.prefill_logits[i]}));
    diff = std::max(diff, std::fabs(double{g.prefill_logits[i]} - c.prefill_logits[i]));
  }
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_FALSE(g.tokens[i].empty()) << i;
  if (GetParam() == "qwen3-tiny") {
    EXPECT_LT(diff / top, 3e-2);
  }
  std::printf("%s fp8 weights on cuda: max relative logit difference %.3g vs cpu\n",
              GetParam().c_str(), diff / top);
}

// ModelOptions::fuse_residual against the op-by-op layers, bf16 weights, tokens on the GPU: the
// three prompts decode together (3 rows: the o and down GEMVs add into the residual) and must
// give the same tokens; the prompts (41 rows: each add left pending for AddRmsNorm) the same
// logits. The dense fixture only: MoE layers run op by op either way.
class CudaFuseResidualTest : public CudaFixtureTest {};

TEST_P(CudaFuseResidualTest, GivesTheOpByOpResults) {
  ModelOptions fused, plain;
  fused.weight_dtype = plain.weight_dtype = backend::DType::kBF16;
  plain.fuse_residual = false;
  const ModelRun a = RunModel(dir, *gpu, cases, eos, nullptr, fused, {.argmax = true});
  const ModelRun b = RunModel(dir, *gpu, cases, eos, nullptr, plain, {.argmax = true});
  ASSERT_TRUE(gpu->Synchronize().ok()) << gpu->status().message();
  ASSERT_EQ(a.prefill_logits.size(), b.prefill_logits.size());
  ASSERT_FALSE(a.prefill_logits.empty());
  double diff = 0, top = 0;
  for (size_t i = 0; i < a.prefill_logits.size(); ++i) {
    top = std::max(top, std::fabs(double{b.prefill_logits[i]}));
    diff = std::max(diff, std::fabs(double{a.prefill_logits[i]} - b.prefill_logits[i]));
  }
  EXPECT_LT(diff / top, 1e-5);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_FALSE(a.tokens[i].empty()) << i;
    EXPECT_EQ(a.tokens[i], b.tokens[i]) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModelTest, ::testing::Values("qwen3-tiny", "qwen3-moe-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFuseResidualTest, ::testing::Values("qwen3-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spark::engine::model
