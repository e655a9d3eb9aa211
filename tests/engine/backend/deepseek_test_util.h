// Helpers of the CPU DeepSeek op tests: random inputs, a cache of slots in host memory (the CPU
// backend's memory) and a relative-error check against double references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/backend/deepseek_op_args.h"

namespace spark::engine::backend::cpu::testing {

inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A layer cache of `slots` x `stride` random floats; fields at offsets into it.
struct FakeCache {
  FakeCache(int64_t slots, int stride, uint32_t seed)
      : stride(stride), data(Random(static_cast<size_t>(slots) * stride, seed)) {}
  CacheField Field(int offset, int width) { return {data.data(), stride, offset, width}; }
  const float* At(const CacheField& f, int64_t slot) const {
    return data.data() + slot * stride + f.offset;
  }
  int stride;
  std::vector<float> data;
};

// max |got - want| / max |want| below `tol`.
inline void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                        double tol) {
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "at " << i;
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  EXPECT_LT(diff / std::max(ref, 1e-30), tol) << "max diff " << diff << ", max ref " << ref;
}

// Softmax in double; -inf entries get 0.
inline std::vector<double> SoftmaxRef(const std::vector<double>& x) {
  double max = -INFINITY;
  for (double v : x) max = std::max(max, v);
  std::vector<double> p(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp(x[i] - max);
  for (double& v : p) v /= sum;
  return p;
}

// Interleaved rotation of the trailing rope_dim channels of v [dim], in double.
inline void RotateRef(double* v, int dim, const std::vector<float>& inv_freq, double scale,
                      int position, bool inverse) {
  const int rope_dim = 2 * static_cast<int>(inv_freq.size());
  double* r = v + dim - rope_dim;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double angle = double{static_cast<float>(position) * inv_freq[i]};
    const double c = std::cos(angle) * scale, s = (inverse ? -1 : 1) * std::sin(angle) * scale;
    const double a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

}  // namespace spark::engine::backend::cpu::testing
