// Elementwise ops that have no better home: residual add and dtype conversion.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "base/status.h"

namespace spark::kernels {

// x[i] += y[i] for i < count.
template <typename T>
Status Add(T* x, const T* y, size_t count, cudaStream_t stream);

// dst[i] = src[i] converted (bf16 rounds to nearest even).
Status CastF32ToBf16(const float* src, size_t count, __nv_bfloat16* dst, cudaStream_t stream);
Status CastBf16ToF32(const __nv_bfloat16* src, size_t count, float* dst, cudaStream_t stream);

}  // namespace spark::kernels
