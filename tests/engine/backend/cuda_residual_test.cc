// CudaBackend's LinearAdd and LinearAddRmsNorm against CpuBackend, whose defaults run Linear,
// then Add (and the norm): a layer's worth of calls as the model makes them with
// ModelOptions::fuse_residual, at GEMV batches (the add inside the o and down GEMVs) and past them
// (a GEMM into scratch, then the add and the norm in one kernel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/launch_settings.h"
#include "tests/engine/backend/cuda_device_test.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::engine::backend::cuda {
namespace {

using kernels::testing::Random;
using kernels::testing::RelL2;

constexpr int kHidden = 512, kInter = 384, kQ = 256, kKv = 64;
constexpr float kEps = 1e-6f;

// One backend's weights and buffers for a layer, and the calls of Qwen3Model's fused layer.
struct Layer {
  Backend& b;
  Buffer wq, wk, wv, o, gate_up, down;  // Linear weights
  Buffer g1, g2;                        // the two norms
  Buffer h, attn, normed, tmp, q, k, v, gate_up_out, act;

  Layer(Backend& backend, DType dtype, int64_t rows) : b(backend) {
    auto matrix = [&](int n, int k, uint32_t seed) {
      Buffer m = *b.AllocateMatrix(n, k, dtype);
      b.UploadMatrix(Random(size_t(n) * k, seed, 0.05f), k, m);
      return m;
    };
    auto put = [&](const std::vector<float>& host) {
      Buffer x = *b.Allocate(host.size());
      b.Upload(host, x.data());
      return x;
    };
    auto norm_weight = [&](uint32_t seed) {
      auto g = Random(kHidden, seed, 0.3f);
      for (float& x : g) x += 1.0f;
      return put(g);
    };
    wq = matrix(kQ, kHidden, 1);
    wk = matrix(kKv, kHidden, 11);
    wv = matrix(kKv, kHidden, 12);
    o = matrix(kHidden, kQ, 2);
    gate_up = matrix(2 * kInter, kHidden, 3);
    down = matrix(kHidden, kInter, 4);
    g1 = norm_weight(5);
    g2 = norm_weight(6);
    h = put(Random(rows * kHidden, 7, 3.0f));
    attn = put(Random(rows * kQ, 8));
    for (auto [buffer, width] : {std::pair{&normed, kHidden},
                                 {&tmp, kHidden},
                                 {&q, kQ},
                                 {&k, kKv},
                                 {&v, kKv},
                                 {&gate_up_out, 2 * kInter},
                                 {&act, kInter}}) {
      *buffer = *b.Allocate(size_t(rows) * width);
    }
  }

  // q/k/v of the normed h; h += attn o^T and its norm; act of that; h += act down^T.
  void Run(int64_t rows) {
    const LinearOut outs[] = {
        {wq.weight(), kQ, q.data()}, {wk.weight(), kKv, k.data()}, {wv.weight(), kKv, v.data()}};
    b.RmsNorm(h.data(), g1.data(), rows, kHidden, kEps, normed.data());
    b.LinearMany(normed.data(), rows, kHidden, outs);
    b.LinearAddRmsNorm(attn.data(), rows, kQ, o.weight(), kHidden, tmp.data(), h.data(),
                       g2.data(), kEps, normed.data());
    b.LinearSiluMul(normed.data(), rows, kHidden, gate_up.weight(), kInter, gate_up_out.data(),
                    act.data());
    b.LinearAdd(act.data(), rows, kInter, down.weight(), kHidden, tmp.data(), h.data());
  }

  std::vector<float> Get(const Buffer& x) {
    std::vector<float> host(x.size());
    b.Download(x.data(), host);
    return host;
  }
};

class CudaResidualTest : public CudaDeviceTest {
 protected:
  cpu::CpuBackend cpu_{2};
};

// The same, for each Linear weight type.
class CudaResidualLayerTest : public CudaResidualTest,
                              public ::testing::WithParamInterface<DType> {};

// Rows up to the GEMV's (kernels::LaunchSettings::gemv_max_rows) run the o and down GEMVs adding
// into h (fp32 sums in another order: 1e-5); more rows run cuBLASLt over bf16 activations
// (1e-2), then the add (with the norm, for o). fp8
// weights: one row (more go to the FP8 GEMM over quantised activations, fp8_test's business).
TEST_P(CudaResidualLayerTest, LayerMatchesCpuDefaults) {
  const std::vector<int64_t> batches =
      GetParam() == DType::kFP8 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 4, 9};
  for (int64_t rows : batches) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    Layer c(cpu_, GetParam(), rows), g(*gpu_, GetParam(), rows);
    c.Run(rows);
    g.Run(rows);
    const double tol =
        GetParam() == DType::kFP8 || rows <= kernels::GetLaunchSettings().gemv_max_rows ? 1e-5
                                                                                        : 1e-2;
    EXPECT_LT(RelL2(g.Get(g.q), c.Get(c.q)), tol) << "q";
    EXPECT_LT(RelL2(g.Get(g.v), c.Get(c.v)), tol) << "v";
    EXPECT_LT(RelL2(g.Get(g.act), c.Get(c.act)), tol) << "act";
    EXPECT_LT(RelL2(g.Get(g.h), c.Get(c.h)), tol) << "h";
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().message();
  }
}

// LinearAddRmsNorm writes the norm's bf16 copy when asked, at GEMV and GEMM rows alike: a bf16
// Linear reading it gives the bits of one that casts the norm's fp32 output.
TEST_F(CudaResidualTest, LinearAddRmsNormWritesTheCopy) {
  for (int64_t rows : {1, 9}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    Layer g(*gpu_, DType::kBF16, rows);
    Buffer copy = *gpu_->Allocate(size_t(rows) * kHidden / 2);
    const Output normed{g.normed.data(), copy.raw()};
    gpu_->LinearAddRmsNorm(g.attn.data(), rows, kQ, g.o.weight(), kHidden, g.tmp.data(),
                           g.h.data(), g.g2.data(), kEps, normed);
    Buffer from_copy = *gpu_->Allocate(size_t(rows) * kQ), cast = *gpu_->Allocate(size_t(rows) * kQ);
    // Past the GEMV the Linear reads the copy; at GEMV rows it reads fp32 either way.
    gpu_->Linear(Input(normed), rows, kHidden, g.wq.weight(), kQ, from_copy.data());
    gpu_->Linear(g.normed.data(), rows, kHidden, g.wq.weight(), kQ, cast.data());
    EXPECT_EQ(g.Get(from_copy), g.Get(cast));
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CudaResidualLayerTest,
                         ::testing::Values(DType::kBF16, DType::kFP8),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace spark::engine::backend::cuda
