// Warp-level tensor-core helpers (sm_80 and later, so both sm_90 and GB10's sm_121): bf16
// mma.sync m16n8k16 with fp32 accumulators, ldmatrix fragment loads from shared memory and
// cp.async 16-byte copies. Fragment layouts (PTX ISA, "mma.m16n8k16"), lane = threadIdx.x % 32:
//   A 16x16 (row-major), 4 registers of two bf16: rows lane/4 and lane/4 + 8, columns
//     (lane%4)*2 + {0,1} and the same + 8;
//   B 16x8 (column-major), 2 registers: rows (k) (lane%4)*2 + {0,1} and + 8, column lane/4;
//   C 16x8 fp32, 4 values: c0,c1 at row lane/4, columns (lane%4)*2 + {0,1}; c2,c3 at row + 8.
// A C fragment pair covering columns 0..15 is therefore an A fragment of the next product, the
// identity flash attention uses to feed probabilities into P*V without shared memory.
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_math.cuh"

namespace spark::kernels::detail {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same, each matrix transposed (B fragments from a row-major [k][n] tile).
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c += a * b on one 16x8x16 tile.
__device__ __forceinline__ void MmaBf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared without passing through registers; zero-fills when !valid (the
// source is then not read, but must still be a valid address).
__device__ __forceinline__ void CpAsync16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(shared)),
               "l"(global), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

__device__ __forceinline__ void CpAsyncWaitAll() { asm volatile("cp.async.wait_all;\n" ::); }

// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWaitGroup() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x on the special-function unit, denormal results flushed to zero: softmax weights that small
// do not change a sum that holds a 1, and skipping exp2f's denormal handling saves instructions
// per score.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max and sum over the four lanes of a quad (the lanes that hold one row of a C fragment).
__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float QuadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Eight elements at `src` into shared memory as bf16 (16 bytes at `dst`); zeros when !valid. A
// bf16 source goes by cp.async (wait for it as for CpAsync16), an fp32 one is rounded on the way.
__device__ __forceinline__ void StageBf16x8(__nv_bfloat16* dst, const __nv_bfloat16* src,
                                            bool valid) {
  CpAsync16(dst, src, valid);
}

__device__ __forceinline__ void StageBf16x8(__nv_bfloat16* dst, const float* src, bool valid) {
  uint4 packed = make_uint4(0, 0, 0, 0);
  if (valid) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(src));
    const float4 b = __ldg(reinterpret_cast<const float4*>(src) + 1);
    packed =
        make_uint4(PackBf16(a.x, a.y), PackBf16(a.z, a.w), PackBf16(b.x, b.y), PackBf16(b.z, b.w));
  }
  *reinterpret_cast<uint4*>(dst) = packed;
}

// One online-softmax step of flash attention over a warp's score fragments s[kN][4] (this
// thread's rows a = lane / 4 and b = a + 8 of the C layout): raises the running maxima m (base 2,
// of the scores times scale_log2), turns s into exp2(s * scale_log2 - m), adds them to this
// thread's running sums l (sum the quad at the end) and returns in corr the factors by which the
// running output must be scaled. A row with nothing visible yet keeps m = -inf and gets zeros.
template <int kN>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&s)[kN][4], float scale_log2, float& m_a,
                                                  float& m_b, float& l_a, float& l_b, float& corr_a,
                                                  float& corr_b) {
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int nb = 0; nb < kN; ++nb) {
    mx_a = fmaxf(mx_a, fmaxf(s[nb][0], s[nb][1]));
    mx_b = fmaxf(mx_b, fmaxf(s[nb][2], s[nb][3]));
  }
  const float new_a = fmaxf(m_a, QuadMax(mx_a) * scale_log2);
  const float new_b = fmaxf(m_b, QuadMax(mx_b) * scale_log2);
  // Subtract 0 from a row still at -inf, so exp2 gives 0, not NaN.
  const float base_a = new_a == -INFINITY ? 0.0f : new_a;
  const float base_b = new_b == -INFINITY ? 0.0f : new_b;
  corr_a = FastExp2(m_a - base_a);
  corr_b = FastExp2(m_b - base_b);
  m_a = new_a;
  m_b = new_b;
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int nb = 0; nb < kN; ++nb) {
    s[nb][0] = FastExp2(fmaf(s[nb][0], scale_log2, -base_a));
    s[nb][1] = FastExp2(fmaf(s[nb][1], scale_log2, -base_a));
    s[nb][2] = FastExp2(fmaf(s[nb][2], scale_log2, -base_b));
    s[nb][3] = FastExp2(fmaf(s[nb][3], scale_log2, -base_b));
    sum_a += s[nb][0] + s[nb][1];
    sum_b += s[nb][2] + s[nb][3];
  }
  l_a = l_a * corr_a + sum_a;
  l_b = l_b * corr_b + sum_b;
}

}  // namespace spark::kernels::detail
