// FP8 E4M3 weights with 128 x 128 block scales (DeepSeek's and Qwen3-FP8's checkpoint format):
// w [n, k] as E4M3 bytes, scales [ceil(n / 128), ceil(k / 128)] fp32 row-major, element (r, c) =
// value(w[r, c]) * scales[r / 128, c / 128]. Decode streams them through the GEMV (gemv.h); a
// GEMM widens them to bf16 first (below) or, on Hopper, runs cuBLASLt's block-scaled FP8 GEMM
// (gemm.h) over activations quantised per 1 x 128 block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

constexpr int kFp8Block = 128;
constexpr float kFp8Max = 448.0f;  // the largest finite E4M3 magnitude

// out [n, k] = the bf16 rounding of each element's value. k a multiple of 16; w and out 16-byte
// aligned.
Status DequantFp8ToBf16(const uint8_t* w, const float* scales, int64_t n, int k, __nv_bfloat16* out,
                        cudaStream_t stream);

// The activations of an FP8 GEMM (Gemm::RunFp8): x [m, k] fp32 as E4M3 with one scale per 1 x 128
// block, scale = the block's largest magnitude / 448 (1 for an all-zero block), out[r, c] = the
// E4M3 rounding of x[r, c] / scale (saturating), scales[kb * scale_rows + r] for block kb of row
// r (the layout cuBLASLt reads; scale_rows >= m leaves room for padding rows). k a multiple of
// 128; x 16-byte aligned.
Status QuantizeRowsFp8(const float* x, int64_t m, int k, uint8_t* out, float* scales,
                       int64_t scale_rows, cudaStream_t stream);

// dst[i] = the E4M3 rounding of lo + (hi - lo) * u_i (FillUniform's u_i): random fp8 weights for
// benchmarks, made where they live.
Status FillFp8Uniform(uint8_t* dst, size_t count, uint64_t seed, float lo, float hi,
                      cudaStream_t stream);

}  // namespace spark::kernels
