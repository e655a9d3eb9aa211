// Device helpers of the DeepSeek kernels (deepseek_*.cu): four-float loads and stores that use
// one 16-byte access where the address allows, a cache field's row, the interleaved RoPE angle
// and the sigmoid as the CPU reference computes them. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/deepseek_cache.h"

namespace spark::kernels::detail {

// Floats p[0..4): one float4 load when `aligned` (p 16-byte aligned), else four.
__device__ __forceinline__ float4 Load4(const float* p, bool aligned) {
  if (aligned) return __ldg(reinterpret_cast<const float4*>(p));
  return make_float4(p[0], p[1], p[2], p[3]);
}

__device__ __forceinline__ void Store4(float* p, float4 v, bool aligned) {
  if (aligned) {
    *reinterpret_cast<float4*>(p) = v;
    return;
  }
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
  p[3] = v.w;
}

__device__ __forceinline__ float Dot4(float4 a, float4 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

__device__ __forceinline__ float* RowAt(const CacheRows& f, int64_t slot) {
  return f.base + slot * f.stride + f.offset;
}

// Whether every row of the field starts 16-byte aligned (four-float vectors over its width).
__host__ __device__ inline bool RowsAligned(const CacheRows& f) {
  return reinterpret_cast<uintptr_t>(f.base) % 16 == 0 && f.stride % 4 == 0 && f.offset % 4 == 0;
}

// cos and sin of pair i at `position` (times the scale; sin negated for the inverse), as the
// reference: angle = float(position) * inv_freq[i] in fp32.
__device__ __forceinline__ void RopeAngle(const TrailingRope& r, int32_t position, int i, float* c,
                                          float* s) {
  float sn, cs;
  sincosf(static_cast<float>(position) * r.inv_freq[i], &sn, &cs);
  *c = cs * r.scale;
  *s = (r.inverse ? -sn : sn) * r.scale;
}

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace spark::kernels::detail
