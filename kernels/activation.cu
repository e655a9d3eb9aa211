// SiLU-and-mul over fp32 sums: a row-wise vectorised kernel for aligned fp32 rows, a grid-stride
// loop over rows x inter outputs otherwise; optionally a bf16 copy of the result.
#include <algorithm>
#include <type_traits>

#include "kernels/activation.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

__device__ __forceinline__ float Silu(float g) { return g / (1.0f + expf(-g)); }

// Any shape: one element per thread step.
template <typename T>
__global__ void SiluMulKernel(const T* __restrict__ gate_up, int64_t rows, int inter,
                              T* __restrict__ out, __nv_bfloat16* __restrict__ out_bf16) {
  detail::WaitForPrecedingKernel();
  const int64_t total = rows * inter;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / inter;
    const int i = static_cast<int>(idx % inter);
    const float g = detail::ToFloat(gate_up[r * 2 * inter + i]);
    const float u = detail::ToFloat(gate_up[r * 2 * inter + inter + i]);
    const T v = detail::FromFloat<T>(Silu(g) * u);
    out[idx] = v;
    if (out_bf16 != nullptr) out_bf16[idx] = __float2bfloat16_rn(detail::ToFloat(v));
  }
}

// fp32 rows with inter % 4 == 0 and 16-byte aligned rows: blockIdx.y walks the rows, threads
// take 4 columns at a time (no division per element).
__global__ void SiluMulRowsKernel(const float* __restrict__ gate_up, int64_t rows, int inter,
                                  float* __restrict__ out, __nv_bfloat16* __restrict__ out_bf16) {
  detail::WaitForPrecedingKernel();
  using V = detail::Vec<float, 4>;
  const int chunks = inter / 4;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const V* g = reinterpret_cast<const V*>(gate_up + r * 2 * inter);
    const V* u = g + chunks;
    V* o = reinterpret_cast<V*>(out + r * inter);
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
      const V gv = g[c], uv = u[c];
      V v;
#pragma unroll
      for (int i = 0; i < 4; ++i) v.v[i] = Silu(gv.v[i]) * uv.v[i];
      o[c] = v;
      if (out_bf16 != nullptr) {
        detail::StoreBf16x4(out_bf16 + r * inter + int64_t{c} * 4, v.v[0], v.v[1], v.v[2], v.v[3]);
      }
    }
  }
}

}  // namespace

template <typename T>
Status SiluMul(const T* gate_up, int64_t rows, int inter, T* out, cudaStream_t stream,
               __nv_bfloat16* out_bf16) {
  const int64_t total = rows * inter;
  if (total <= 0) return Status::Ok();
  if constexpr (std::is_same_v<T, float>) {
    if (inter % 4 == 0 && detail::Aligned16(gate_up) && detail::Aligned16(out) &&
        (out_bf16 == nullptr || detail::Aligned16(out_bf16))) {
      const int chunks = inter / 4;
      const dim3 grid(std::min(detail::CeilDiv(chunks, 256), 64u),
                      static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
      SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(SiluMulRowsKernel, grid, 256, 0, stream,
                                                         gate_up, rows, inter, out, out_bf16));
      return Status::Ok();
    }
  }
  const unsigned blocks = std::min<unsigned>(detail::CeilDiv(total, 256), 65535u * 8u);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(SiluMulKernel<T>, blocks, 256, 0, stream,
                                                     gate_up, rows, inter, out, out_bf16));
  return Status::Ok();
}

template Status SiluMul<float>(const float*, int64_t, int, float*, cudaStream_t, __nv_bfloat16*);
template Status SiluMul<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int, __nv_bfloat16*,
                                       cudaStream_t, __nv_bfloat16*);

}  // namespace spark::kernels
