// Embedding lookup: one block per token, a coalesced row copy.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

// dst = table row `id` - row_begin when this shard holds it, else zeros.
template <typename T>
__device__ __forceinline__ void CopyRow(const T* __restrict__ table, int64_t row_begin,
                                        int64_t rows, int hidden, int64_t id, T* __restrict__ dst) {
  const int64_t row = id - row_begin;
  if (row >= 0 && row < rows) {
    const T* src = table + row * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = T(0.0f);
  }
}

template <typename T>
__global__ void EmbeddingKernel(const T* __restrict__ table, int64_t row_begin, int64_t rows,
                                int hidden, const int32_t* __restrict__ ids, T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int64_t t = blockIdx.x;
  CopyRow(table, row_begin, rows, hidden, ids[t], out + t * hidden);
}

template <typename T>
__global__ void EmbeddingOfArgMaxKernel(const T* __restrict__ table, int64_t row_begin,
                                        int64_t rows, int hidden, const float* __restrict__ pairs,
                                        int parts, int64_t tokens, T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int64_t t = blockIdx.x;
  float best = 0.0f, best_id = 0.0f;
  for (int p = 0; p < parts; ++p) {
    const float value = pairs[(p * tokens + t) * 2], id = pairs[(p * tokens + t) * 2 + 1];
    if (p == 0 || value > best || (value == best && id < best_id)) {
      best = value;
      best_id = id;
    }
  }
  CopyRow(table, row_begin, rows, hidden, static_cast<int64_t>(best_id), out + t * hidden);
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

template <typename T>
Status EmbeddingOfArgMax(const T* table, int64_t row_begin, int64_t rows, int hidden,
                         const float* pairs, int parts, int64_t tokens, T* out,
                         cudaStream_t stream) {
  if (tokens <= 0) return Status::Ok();
  if (parts < 1) return InvalidArgumentError("embedding of argmax: parts must be >= 1");
  const int threads = std::min(1024, (hidden + 31) / 32 * 32);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(EmbeddingOfArgMaxKernel<T>, tokens, threads, 0,
                                                     stream, table, row_begin, rows, hidden, pairs,
                                                     parts, tokens, out));
  return Status::Ok();
}

template Status Embedding<float>(const float*, int64_t, int64_t, int, const int32_t*, int64_t,
                                 float*, cudaStream_t);
template Status Embedding<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int64_t, int,
                                         const int32_t*, int64_t, __nv_bfloat16*, cudaStream_t);

template Status EmbeddingOfArgMax<float>(const float*, int64_t, int64_t, int, const float*, int,
                                         int64_t, float*, cudaStream_t);

}  // namespace spark::kernels
