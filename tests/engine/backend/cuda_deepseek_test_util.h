// The fixture of the CUDA DeepSeek op tests: a CudaBackend (skipped without a CUDA device) and
// the CPU reference backend, arrays that live on both (host for the reference, device for the
// GPU), and the comparisons: values relative to the largest reference magnitude, selections
// equal except where the reference's own scores tie.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "tests/engine/backend/cuda_device_test.h"
#include "kernels/cuda_check.h"
#include "tests/engine/backend/deepseek_test_util.h"

namespace spark::engine::backend::cuda::testing {

using cpu::testing::Random;

// An array on both sides: `host` for the CPU reference, `dev` (same values) for the GPU.
struct Twin {
  std::vector<float> host;
  Buffer dev;
  float* h() { return host.data(); }
  float* d() { return dev.data(); }
  // The side an op runs on (ops take non-const pointers for their outputs and inputs alike).
  float* on(bool device) const { return const_cast<float*>(device ? dev.data() : host.data()); }
};

class CudaDeepseekTest : public CudaDeviceTest {
 protected:
  DeepseekOps& cpu_ops() { return *cpu_.deepseek_ops(); }
  DeepseekOps& gpu_ops() { return *gpu_->deepseek_ops(); }

  Twin Both(std::vector<float> values) {
    Twin t{std::move(values), {}};
    auto b = gpu_->Allocate(std::max<size_t>(t.host.size(), 1));
    EXPECT_TRUE(b.ok()) << b.status().message();
    t.dev = std::move(*b);
    if (!t.host.empty()) gpu_->Upload(t.host, t.dev.data());
    return t;
  }
  // The GPU side of `t` after the ops so far (fails the test on a recorded error).
  std::vector<float> Get(const Twin& t) {
    std::vector<float> h(t.host.size());
    gpu_->Download(t.dev.data(), h);
    EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().message();
    return h;
  }
  cpu::CpuBackend cpu_{
      static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())))};
};

// max |got - want| / max |want| below `tol`, no NaN.
inline void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, ref = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "NaN at " << i;
    const double d = std::fabs(double{got[i]} - double{want[i]});
    if (d > diff) {
      diff = d;
      worst = i;
    }
    ref = std::max(ref, std::fabs(double{want[i]}));
  }
  EXPECT_LE(diff / std::max(ref, 1e-30), tol)
      << "max diff " << diff << " at " << worst << " (got " << got[worst] << ", want "
      << want[worst] << "), max ref " << ref;
}

// Element-for-element equality, bit patterns included (-0 vs +0), with the first difference.
inline void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::memcmp(&got[i], &want[i], sizeof(float)) == 0)
        << "at " << i << ": got " << got[i] << ", want " << want[i];
  }
}

// Top-k rows [rows, k] of candidate indices (-1 padded). The GPU's rows must hold distinct
// indices, as many as the reference's, and at each place either the reference's index or one
// whose reference score (scores [rows, stride]) is within `tol` of the row's largest magnitude
// of the reference's choice there: a near tie that fp32 rounding may order either way. A tie
// that is exact by construction (same_inputs(row, a, b): candidates a and b score from identical
// inputs, so every summation order ties them) must go as the reference's, to the lower index.
// Other exact ties of the reference's fp32 scores are rounding coincidences (their exact scores
// differ; a GPU summing in another order may order them either way) and count as near ties.
// Returns the places that differed.
inline int64_t ExpectSameSelection(
    const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& scores,
    int64_t stride, int k, double tol,
    const std::function<bool(int64_t row, int64_t a, int64_t b)>& same_inputs) {
  EXPECT_EQ(got.size(), want.size());
  int64_t differing = 0;
  for (size_t r = 0; r * k < want.size(); ++r) {
    const float* g = &got[r * k];
    const float* w = &want[r * k];
    const float* s = &scores[r * stride];
    double scale = 0;
    for (int64_t c = 0; c < stride; ++c) {
      if (std::isfinite(s[c])) scale = std::max(scale, std::fabs(double{s[c]}));
    }
    std::set<float> seen;
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(g[i] < 0, w[i] < 0) << "row " << r << " place " << i;
      if (g[i] < 0 || w[i] < 0) continue;
      EXPECT_TRUE(seen.insert(g[i]).second) << "row " << r << " repeats " << g[i];
      if (g[i] == w[i]) continue;
      ++differing;
      const double a = s[static_cast<int64_t>(g[i])], b = s[static_cast<int64_t>(w[i])];
      EXPECT_FALSE(a == b && same_inputs(static_cast<int64_t>(r), static_cast<int64_t>(g[i]),
                                         static_cast<int64_t>(w[i])))
          << "row " << r << " place " << i << ": an exact tie went to " << g[i]
          << ", not the lower index " << w[i];
      EXPECT_LE(std::fabs(a - b), tol * std::max(scale, 1e-30))
          << "row " << r << " place " << i << ": got " << g[i] << " (score " << a << "), want "
          << w[i] << " (score " << b << ")";
    }
  }
  return differing;
}

}  // namespace spark::engine::backend::cuda::testing
