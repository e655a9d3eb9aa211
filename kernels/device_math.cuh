// Device-side helpers shared by the kernels: fp32/bf16 loads and stores with fp32 arithmetic,
// the paged-cache slot of a token, warp reductions and launch arithmetic. Included only by .cu
// files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spark::kernels::detail {

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __nv_fp8_e4m3 FromFloat<__nv_fp8_e4m3>(float v) {
  return __nv_fp8_e4m3(v);  // nearest, saturating to +-448
}

// Two E4M3 values (exactly, through half precision).
__device__ __forceinline__ float2 Fp8x2ToFloat2(__nv_fp8x2_storage_t pair) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
}

// kVec elements moved as one aligned vector access (16 bytes for 4 floats or 8 bf16).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

// silu(min(gate, limit)) * clamp(up, -limit, limit), unclamped when limit <= 0 (DeepSeek's
// SwiGLU with swiglu_limit).
__device__ __forceinline__ float ClampedSwiGlu(float gate, float up, float limit) {
  if (limit > 0.0f) {
    gate = fminf(gate, limit);
    up = fminf(fmaxf(up, -limit), limit);
  }
  return gate / (1.0f + expf(-gate)) * up;
}

// Two floats as bf16 (round to nearest even), `lo` in the low half (the lower address; in a
// tensor-core fragment register, the element of the lower column).
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Four floats as bf16 (round to nearest even) in 8 bytes at dst (8-byte aligned).
__device__ __forceinline__ void StoreBf16x4(__nv_bfloat16* dst, float a, float b, float c,
                                            float d) {
  *reinterpret_cast<uint2*>(dst) = make_uint2(PackBf16(a, b), PackBf16(c, d));
}

// The paged-cache slot of token `tok` of a sequence whose block table is `table` (attention.h).
__device__ __forceinline__ int64_t CacheSlot(const int32_t* table, int tok, int block_size) {
  return int64_t{table[tok / block_size]} * block_size + tok % block_size;
}

// CacheSlot for kernels that look up many tokens: when the block size is a power of two (the
// engine's 16) the division is a shift and a mask, otherwise CacheSlot's; the choice is the same
// for every thread of a kernel.
struct SlotFinder {
  const int32_t* table;
  int block_size;
  int shift;  // log2(block_size), or -1 when it is not a power of two

  __device__ __forceinline__ SlotFinder(const int32_t* t, int bs) : table(t), block_size(bs) {
    shift = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  }

  __device__ __forceinline__ int64_t operator()(int tok) const {
    if (shift >= 0) {
      return (int64_t{table[tok >> shift]} << shift) + (tok & (block_size - 1));
    }
    return CacheSlot(table, tok, block_size);
  }
};

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over a block whose size is a multiple of 32 (at most 1024); every thread gets the result.
// `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(v);
}

// Per-head RMSNorm (weight [head_dim]) then RoPE (rotate-half, angle pos * inv_freq[i]) of one
// head held by one warp in registers: lane l holds elements [kE l, kE l + kE) in a, so the
// rotation partner of element i (i +- head_dim / 2) sits in lane l ^ 16. Qwen3's q/k path.
template <int kE>
__device__ __forceinline__ void NormRopeLane(float (&a)[kE], const float* weight, float eps,
                                             float pos, const float* __restrict__ inv_freq,
                                             int lane) {
  constexpr int kDim = 32 * kE, kHalf = kDim / 2;
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kE; ++i) ss += a[i] * a[i];
  ss = WarpSum(ss);
  const float inv = rsqrtf(ss / kDim + eps);
#pragma unroll
  for (int i = 0; i < kE; ++i) a[i] = weight[lane * kE + i] * (a[i] * inv);
  const bool low = lane < 16;
#pragma unroll
  for (int i = 0; i < kE; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, a[i], 16);
    const int pair = (lane * kE + i) % kHalf;
    float sn, cs;
    sincosf(pos * inv_freq[pair], &sn, &cs);
    // low half: a cos - b sin; high half: b cos + a sin (a = low element, b = high element).
    a[i] = low ? a[i] * cs - partner * sn : a[i] * cs + partner * sn;
  }
}

inline unsigned CeilDiv(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace spark::kernels::detail
