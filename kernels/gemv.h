// Skinny GEMMs for decode: out[r, n] = x[r, k] * w[n, k]^T for a handful of fp32 rows x and bf16
// or fp8 (fp8.h: E4M3 with 128 x 128 block scales) weights w [n, k] row-major (a Linear layer's
// layout). A decode step is a pass over the weights, so the kernel streams each weight row once
// with 16-byte loads (a group of 1-4 warps per output feature, or per four with fp8, all rows at
// once) and accumulates in fp32; x stays fp32 (no rounding of the activations, unlike a bf16
// tensor-core GEMM).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// Rows the GEMV serves; more rows go to a tensor-core GEMM (gemm.h).
constexpr int kGemvMaxRows = 4;

// InvalidArgument when rows is outside [1, kGemvMaxRows] or k is not a multiple of 8 (bf16) or
// 16 (fp8); x and w 16-byte aligned.
Status GemvBf16(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int n, float* out,
                cudaStream_t stream);

// The SwiGLU MLP's first half in one pass: act[r, f] = SiLU(x[r] . w[f]) * (x[r] . w[inter + f])
// for the stacked [gate; up] weight w [2 * inter, k] (as kernels::SiluMul computes it).
Status GemvBf16SiluMul(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int inter,
                       float* act, cudaStream_t stream);

// Up to kGemvMaxSegments weight matrices of the same input in one launch (q, k and v):
// out[i][r, n] = x[r, :] * w[i][n, :]^T for n < n[i]; scales[i] only for fp8 weights. With
// accumulate, the products are added into out instead (out += x w^T: an output projection added
// into the residual stream by the one thread that computes each sum).
constexpr int kGemvMaxSegments = 4;
struct GemvSegments {
  int count = 0;
  const void* w[kGemvMaxSegments] = {};
  const float* scales[kGemvMaxSegments] = {};
  float* out[kGemvMaxSegments] = {};
  int n[kGemvMaxSegments] = {};
  bool accumulate = false;
};
Status GemvBf16Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
                    cudaStream_t stream);

// The same over fp8 weights: E4M3 bytes w [n, k] and fp32 scales [ceil(n / 128), ceil(k / 128)].
Status GemvFp8(const float* x, int64_t rows, int k, const uint8_t* w, const float* scales, int n,
               float* out, cudaStream_t stream);
Status GemvFp8SiluMul(const float* x, int64_t rows, int k, const uint8_t* w, const float* scales,
                      int inter, float* act, cudaStream_t stream);
Status GemvFp8Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
                   cudaStream_t stream);

}  // namespace spark::kernels
