// KV cache write: one block per token copies its key and value rows to their cache slot.
#include <algorithm>

#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

template <typename T, typename C>
__global__ void WriteKvKernel(const T* __restrict__ k, const T* __restrict__ v,
                              const int64_t* __restrict__ slots, int kv_width, C* k_cache,
                              C* v_cache) {
  detail::WaitForPrecedingKernel();
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  for (int i = threadIdx.x; i < kv_width; i += blockDim.x) {
    k_cache[slot * kv_width + i] = detail::FromFloat<C>(detail::ToFloat(k[t * kv_width + i]));
    v_cache[slot * kv_width + i] = detail::FromFloat<C>(detail::ToFloat(v[t * kv_width + i]));
  }
}

}  // namespace

template <typename T, typename C>
Status WriteKv(const T* k, const T* v, const int64_t* slots, int64_t tokens, int kv_width,
               C* k_cache, C* v_cache, cudaStream_t stream) {
  if (tokens <= 0) return Status::Ok();
  const int threads = std::min(1024, (kv_width + 31) / 32 * 32);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      WriteKvKernel<T, C>, tokens, threads, 0, stream, k, v, slots, kv_width, k_cache, v_cache));
  return Status::Ok();
}

template Status WriteKv(const float*, const float*, const int64_t*, int64_t, int, float*, float*,
                        cudaStream_t);
template Status WriteKv(const __nv_bfloat16*, const __nv_bfloat16*, const int64_t*, int64_t, int,
                        __nv_bfloat16*, __nv_bfloat16*, cudaStream_t);
template Status WriteKv(const float*, const float*, const int64_t*, int64_t, int, __nv_bfloat16*,
                        __nv_bfloat16*, cudaStream_t);

}  // namespace spark::kernels
