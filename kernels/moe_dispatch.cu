// MoE dispatch and combine: count the entries per local expert, prefix-sum them, place each
// entry (atomics: the order inside an expert does not matter, each row's GEMM result is its
// own), gather the x rows; combine sums each token's top-k expert outputs in k order.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/moe.h"

namespace spark::kernels {
namespace {

__global__ void CountKernel(const int32_t* __restrict__ ids, int64_t entries, int expert_begin,
                            int num_local, int32_t* counts) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < entries;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int e = ids[i] - expert_begin;
    if (e >= 0 && e < num_local) atomicAdd(&counts[e], 1);
  }
}

// One thread: num_local is at most a few hundred.
__global__ void ScanKernel(const int32_t* counts, int num_local, int32_t* offsets,
                           int32_t* cursor) {
  int32_t total = 0;
  for (int e = 0; e < num_local; ++e) {
    offsets[e] = total;
    cursor[e] = 0;
    total += counts[e];
  }
  offsets[num_local] = total;
}

template <typename T>
__global__ void PlaceKernel(const T* __restrict__ x, const int32_t* __restrict__ ids,
                            int64_t entries, int top_k, int hidden, int expert_begin, int num_local,
                            const int32_t* __restrict__ offsets, int32_t* cursor,
                            int32_t* __restrict__ position, T* __restrict__ xs) {
  // One block per entry: thread 0 takes a place, the block copies the row there.
  __shared__ int32_t place;
  const int64_t i = blockIdx.x;
  if (threadIdx.x == 0) {
    const int e = ids[i] - expert_begin;
    place = (e >= 0 && e < num_local) ? offsets[e] + atomicAdd(&cursor[e], 1) : -1;
    position[i] = place;
  }
  __syncthreads();
  if (place < 0) return;
  const T* src = x + (i / top_k) * hidden;
  T* dst = xs + int64_t{place} * hidden;
  for (int d = threadIdx.x; d < hidden; d += blockDim.x) dst[d] = src[d];
}

template <typename T>
__global__ void CombineKernel(const T* __restrict__ ys, const int32_t* __restrict__ position,
                              const float* __restrict__ weights, int top_k, int hidden,
                              T* __restrict__ out) {
  const int64_t row = blockIdx.x;
  for (int d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      const int32_t p = position[row * top_k + k];
      if (p >= 0) acc += weights[row * top_k + k] * detail::ToFloat(ys[int64_t{p} * hidden + d]);
    }
    out[row * hidden + d] = detail::FromFloat<T>(acc);
  }
}

int Threads(int hidden) { return std::min(1024, (hidden + 31) / 32 * 32); }

}  // namespace

template <typename T>
Status MoeDispatch(const T* x, int64_t rows, int hidden, const int32_t* ids, int top_k,
                   int expert_begin, int num_local, int32_t* counts, int32_t* offsets,
                   int32_t* cursor, int32_t* position, T* xs, cudaStream_t stream) {
  const int64_t entries = rows * top_k;
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counts, 0, sizeof(int32_t) * num_local, stream));
  if (entries > 0) {
    CountKernel<<<std::min<unsigned>(detail::CeilDiv(entries, 256), 1024), 256, 0, stream>>>(
        ids, entries, expert_begin, num_local, counts);
    SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  ScanKernel<<<1, 1, 0, stream>>>(counts, num_local, offsets, cursor);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  if (entries > 0) {
    PlaceKernel<T><<<entries, Threads(hidden), 0, stream>>>(
        x, ids, entries, top_k, hidden, expert_begin, num_local, offsets, cursor, position, xs);
    SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  return Status::Ok();
}

template <typename T>
Status MoeCombine(const T* ys, const int32_t* position, const float* weights, int64_t rows,
                  int top_k, int hidden, T* out, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  CombineKernel<T><<<rows, Threads(hidden), 0, stream>>>(ys, position, weights, top_k, hidden, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template Status MoeDispatch<float>(const float*, int64_t, int, const int32_t*, int, int, int,
                                   int32_t*, int32_t*, int32_t*, int32_t*, float*, cudaStream_t);
template Status MoeDispatch<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int, const int32_t*, int,
                                           int, int, int32_t*, int32_t*, int32_t*, int32_t*,
                                           __nv_bfloat16*, cudaStream_t);
template Status MoeCombine<float>(const float*, const int32_t*, const float*, int64_t, int, int,
                                  float*, cudaStream_t);
template Status MoeCombine<__nv_bfloat16>(const __nv_bfloat16*, const int32_t*, const float*,
                                          int64_t, int, int, __nv_bfloat16*, cudaStream_t);

}  // namespace spark::kernels
