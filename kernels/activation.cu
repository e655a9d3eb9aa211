// SiLU-and-mul: a grid-stride loop over rows x inter outputs; fp32 arithmetic.
#include <algorithm>

#include "kernels/activation.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

template <typename T>
__global__ void SiluMulKernel(const T* __restrict__ gate_up, int64_t rows, int inter,
                              T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int64_t total = rows * inter;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / inter;
    const int i = static_cast<int>(idx % inter);
    const float g = detail::ToFloat(gate_up[r * 2 * inter + i]);
    const float u = detail::ToFloat(gate_up[r * 2 * inter + inter + i]);
    out[idx] = detail::FromFloat<T>(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

template <typename T>
Status SiluMul(const T* gate_up, int64_t rows, int inter, T* out, cudaStream_t stream) {
  const int64_t total = rows * inter;
  if (total <= 0) return Status::Ok();
  const unsigned blocks = std::min<unsigned>(detail::CeilDiv(total, 256), 65535u * 8u);
  SPARK_CUDA_RETURN_IF_ERROR(
      detail::LaunchDependent(SiluMulKernel<T>, blocks, 256, 0, stream, gate_up, rows, inter, out));
  return Status::Ok();
}

template Status SiluMul<float>(const float*, int64_t, int, float*, cudaStream_t);
template Status SiluMul<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int, __nv_bfloat16*,
                                       cudaStream_t);

}  // namespace spark::kernels
