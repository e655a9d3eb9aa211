// Helpers for GPU tests: skip without a device, device arrays from host vectors, random data,
// bf16 rounding on the host and relative-error measures.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda_check.h"

namespace spark::kernels::testing {

#define SPARK_SKIP_WITHOUT_GPU()                    \
  do {                                              \
    if (::spark::kernels::CudaDeviceCount() == 0) { \
      GTEST_SKIP() << "no CUDA device";             \
    }                                               \
  } while (0)

#define SPARK_ASSERT_OK(expr)                         \
  do {                                                \
    const ::spark::Status spark_s_ = (expr);          \
    ASSERT_TRUE(spark_s_.ok()) << spark_s_.message(); \
  } while (0)

// A device copy of a host vector; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(1, n) * sizeof(T)), cudaSuccess);
    // Poison: NaN bytes for floats, so an element nothing wrote fails the comparison.
    cudaMemset(p_, 0xFF, std::max<size_t>(1, n) * sizeof(T));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() { return p_; }
  std::vector<T> Host() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline float RoundBf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

inline std::vector<__nv_bfloat16> ToBf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

inline std::vector<float> ToFloat(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __bfloat162float(v[i]);
  return out;
}

// ||got - want|| / ||want|| (L2, in double), NaN when got holds a NaN; want in float or double.
template <typename W>
double RelL2(const std::vector<float>& got, const std::vector<W>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return NAN;
    const double d = double{got[i]} - double{want[i]};
    num += d * d;
    den += double{want[i]} * double{want[i]};
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// max |got - want| / max |want|.
inline double RelMax(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return NAN;
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / std::max(den, 1e-300);
}

}  // namespace spark::kernels::testing
