// RMSNorm, optionally fused with the residual add that precedes it in a pre-norm block.
// All functions enqueue on `stream` and return the launch error (Internal) if any.
// T is float or __nv_bfloat16; arithmetic is fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// For each of `rows` rows of `dim`: when residual is not null, residual[r] += x[r] and the sum is
// what gets normalised; out[r] = v / sqrt(mean(v^2) + eps) * weight. out may equal x (not
// residual). One block per row; rows of any dim (16-byte vector loads when aligned). When
// out_bf16 is not null it also receives out rounded to bf16 (the input of a bf16 GEMM).
template <typename T>
Status RmsNorm(const T* x, T* residual, const T* weight, int64_t rows, int dim, float eps, T* out,
               cudaStream_t stream, __nv_bfloat16* out_bf16 = nullptr);

}  // namespace spark::kernels
