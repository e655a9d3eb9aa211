// Elementwise ops that have no better home: residual add, dtype conversion, column split.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// x[i] += y[i] for i < count.
template <typename T>
Status Add(T* x, const T* y, size_t count, cudaStream_t stream);

// dst[i] = src[i] converted (bf16 rounds to nearest even).
Status CastF32ToBf16(const float* src, size_t count, __nv_bfloat16* dst, cudaStream_t stream);
Status CastBf16ToF32(const __nv_bfloat16* src, size_t count, float* dst, cudaStream_t stream);

// Splits src [rows, n[0] + ... + n[count - 1]] by columns into dense out[i] [rows, n[i]]: the
// outputs of one GEMM over stacked weights (q, k and v) where each consumer wants its own
// matrix.
constexpr int kMaxColumnParts = 4;
struct ColumnParts {
  int count = 0;
  float* out[kMaxColumnParts] = {};
  int n[kMaxColumnParts] = {};
};
Status SplitColumns(const float* src, int64_t rows, const ColumnParts& parts, cudaStream_t stream);

// dst[i] = lo + (hi - lo) * u_i with u_i a hash of (seed, i) in [0, 1): reproducible random
// weights for benchmarks, generated where they live.
template <typename T>
Status FillUniform(T* dst, size_t count, uint64_t seed, float lo, float hi, cudaStream_t stream);

}  // namespace spark::kernels
