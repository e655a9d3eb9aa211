// Embedding lookup: one block per token, a coalesced row copy.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

template <typename T>
__global__ void EmbeddingKernel(const T* __restrict__ table, int64_t row_begin, int64_t rows,
                                int hidden, const int32_t* __restrict__ ids, T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int64_t t = blockIdx.x;
  const int64_t row = ids[t] - row_begin;
  T* dst = out + t * hidden;
  if (row >= 0 && row < rows) {
    const T* src = table + row * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = T(0.0f);
  }
}

}  // namespace

template <typename T>
Status Embedding(const T* table, int64_t row_begin, int64_t rows, int hidden, const int32_t* ids,
                 int64_t tokens, T* out, cudaStream_t stream) {
  if (tokens <= 0) return Status::Ok();
  const int threads = std::min(1024, (hidden + 31) / 32 * 32);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(EmbeddingKernel<T>, tokens, threads, 0, stream,
                                                     table, row_begin, rows, hidden, ids, out));
  return Status::Ok();
}

template Status Embedding<float>(const float*, int64_t, int64_t, int, const int32_t*, int64_t,
                                 float*, cudaStream_t);
template Status Embedding<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int64_t, int,
                                         const int32_t*, int64_t, __nv_bfloat16*, cudaStream_t);

}  // namespace spark::kernels
