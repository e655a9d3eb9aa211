// DeepSeek MoE routing, expert lists and combine (moe_grouped.h).
#include <algorithm>

#include <cub/block/block_scan.cuh>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/moe_grouped.h"

namespace spark::kernels {
namespace {

constexpr int kRouteWarps = 4;
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 32;
constexpr int kMaxLocal = 4096;
constexpr int kListThreads = 1024;

// Warp argmax over (value, index): larger value wins, then the lower index.
__device__ __forceinline__ void ArgMax(float& v, int& idx) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
    if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
  }
}

// One warp per token; scores and the selection keys in shared memory.
__global__ void RouteKernel(DeepseekRouteArgs a) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x * int64_t{kRouteWarps} + warp;
  if (row >= a.rows) return;
  const int E = a.experts, K = a.top_k;
  float* score = smem + warp * 2 * E;
  float* select = score + E;
  const float* lg = a.logits + row * E;
  for (int e = lane; e < E; e += 32) {
    const float x = lg[e] / a.temperature;
    const float s = sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    score[e] = s;
    select[e] = a.bias != nullptr ? s + a.bias[e] : s;
  }
  __syncwarp();
  float sum = 0.0f;  // in selection order, as the reference adds them
  int my_id = 0;
  for (int k = 0; k < K; ++k) {
    int idx;
    if (a.hash_table != nullptr) {
      idx = static_cast<int>(a.hash_table[int64_t{a.token_ids[row]} * K + k]);
    } else {
      float v = -INFINITY;
      idx = 1 << 30;
      for (int e = lane; e < E; e += 32) {
        const float s = select[e];
        if (s > v || (s == v && e < idx)) v = s, idx = e;
      }
      ArgMax(v, idx);
      __syncwarp();
      if (lane == 0) select[idx] = -INFINITY;
      __syncwarp();
    }
    sum += score[idx];
    if (lane == k) my_id = idx;
  }
  if (lane < K) {
    a.ids[row * K + lane] = static_cast<float>(my_id);
    a.weights[row * K + lane] = score[my_id] / (sum + 1e-20f) * a.scaling;
  }
}

// One block: count per local expert, the prefix offsets and work items (thread 0, in expert
// order), then each assignment takes a position in its expert's list.
__global__ void __launch_bounds__(kListThreads) ListKernel(MoeListArgs a) {
  extern __shared__ int32_t lists_smem[];
  int32_t* count = lists_smem;
  int32_t* cursor = lists_smem + a.local;
  for (int e = threadIdx.x; e < a.local; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.assignments; i += blockDim.x) {
    const int e = static_cast<int>(a.ids[i]) - a.expert_begin;
    if (e >= 0 && e < a.local) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // Each thread its experts (kPerThread consecutive ones): list offsets and work items from two
  // exclusive scans over the block, in expert order.
  constexpr int kPerThread = kMaxLocal / kListThreads;
  const int first = threadIdx.x * kPerThread;
  int32_t my_count = 0, my_items = 0;
  for (int e = first; e < first + kPerThread && e < a.local; ++e) {
    my_count += count[e];
    my_items += (count[e] + a.tile - 1) / a.tile;
  }
  using Scan = cub::BlockScan<int32_t, kListThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  int32_t offset = 0, item = 0, total_items = 0;
  Scan(scan_storage).ExclusiveSum(my_count, offset);
  __syncthreads();
  Scan(scan_storage).ExclusiveSum(my_items, item, total_items);
  for (int e = first; e < first + kPerThread && e < a.local; ++e) {
    cursor[e] = offset;
    for (int32_t f = 0; f < count[e]; f += a.tile) {
      a.work[item++] = {e, offset + f, min(a.tile, count[e] - f)};
    }
    offset += count[e];
  }
  if (threadIdx.x == 0) *a.work_count = total_items;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.assignments; i += blockDim.x) {
    const int e = static_cast<int>(a.ids[i]) - a.expert_begin;
    if (e < 0 || e >= a.local) continue;
    const int32_t p = atomicAdd(&cursor[e], 1);
    a.list_token[p] = static_cast<int32_t>(i / a.top_k);
    a.list_assign[p] = static_cast<int32_t>(i);
  }
}

__global__ void CombineKernel(const float* __restrict__ ys, const float* __restrict__ ids,
                              int64_t rows, int top_k, int expert_begin, int local, int hidden,
                              const float* __restrict__ shared, float* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * hidden) return;
  const int64_t t = i / hidden;
  const int h = static_cast<int>(i % hidden);
  float sum = 0.0f;
  for (int k = 0; k < top_k; ++k) {
    const int e = static_cast<int>(ids[t * top_k + k]) - expert_begin;
    if (e >= 0 && e < local) sum += ys[(t * top_k + k) * hidden + h];
  }
  if (shared != nullptr) sum += shared[i];
  out[i] = sum;
}

__global__ void SwiGluClampKernel(const float* __restrict__ gate_up, int64_t rows, int inter,
                                  float limit, float* __restrict__ act) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * inter) return;
  const int64_t r = i / inter;
  const int c = static_cast<int>(i % inter);
  act[i] = detail::ClampedSwiGlu(gate_up[r * 2 * inter + c], gate_up[r * 2 * inter + inter + c],
                                 limit);
}

__global__ void GatherRowsKernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                                 int64_t count, int width, float* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count * width) return;
  out[i] = x[int64_t{rows[i / width]} * width + i % width];
}

__global__ void ScatterScaledRowsKernel(const float* __restrict__ x,
                                        const int32_t* __restrict__ rows,
                                        const float* __restrict__ scales, int64_t count, int width,
                                        float* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count * width) return;
  const int32_t r = rows[i / width];
  out[int64_t{r} * width + i % width] = x[i] * scales[r];
}

}  // namespace

Status SwiGluClamp(const float* gate_up, int64_t rows, int inter, float limit, float* act,
                   cudaStream_t stream) {
  const int64_t n = rows * inter;
  if (n <= 0) return Status::Ok();
  SwiGluClampKernel<<<detail::CeilDiv(n, 256), 256, 0, stream>>>(gate_up, rows, inter, limit, act);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status GatherRows(const float* x, const int32_t* rows, int64_t count, int width, float* out,
                  cudaStream_t stream) {
  const int64_t n = count * width;
  if (n <= 0) return Status::Ok();
  GatherRowsKernel<<<detail::CeilDiv(n, 256), 256, 0, stream>>>(x, rows, count, width, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status ScatterScaledRows(const float* x, const int32_t* rows, const float* scales, int64_t count,
                         int width, float* out, cudaStream_t stream) {
  const int64_t n = count * width;
  if (n <= 0) return Status::Ok();
  ScatterScaledRowsKernel<<<detail::CeilDiv(n, 256), 256, 0, stream>>>(x, rows, scales, count,
                                                                       width, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status DeepseekRoute(const DeepseekRouteArgs& a, cudaStream_t stream) {
  if (a.experts < 1 || a.experts > kMaxExperts || a.top_k < 1 || a.top_k > kMaxTopK ||
      a.top_k > a.experts) {
    return InvalidArgumentError("deepseek routing: need 1 <= top_k <= min(32, experts) and at " +
                                std::string("most 1024 experts; got top_k ") +
                                std::to_string(a.top_k) + ", experts " + std::to_string(a.experts));
  }
  if (a.rows <= 0) return Status::Ok();
  const size_t smem = size_t{kRouteWarps} * 2 * a.experts * sizeof(float);
  RouteKernel<<<detail::CeilDiv(a.rows, kRouteWarps), kRouteWarps * 32, smem, stream>>>(a);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

int MoeMaxWork(int64_t assignments, int local, int tile) {
  return static_cast<int>((assignments + tile - 1) / tile + std::min<int64_t>(local, assignments));
}

Status MoeBuildLists(const MoeListArgs& a, cudaStream_t stream) {
  if (a.local < 1 || a.local > kMaxLocal || a.tile < 1) {
    return InvalidArgumentError("moe lists: need 1..4096 local experts, got " +
                                std::to_string(a.local));
  }
  const size_t smem = 2 * size_t(a.local) * sizeof(int32_t);
  ListKernel<<<1, kListThreads, smem, stream>>>(a);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status MoeCombineAssignments(const float* ys, const float* ids, int64_t rows, int top_k,
                             int expert_begin, int local, int hidden, const float* shared,
                             float* out, cudaStream_t stream) {
  const int64_t n = rows * hidden;
  if (n <= 0) return Status::Ok();
  CombineKernel<<<detail::CeilDiv(n, 256), 256, 0, stream>>>(ys, ids, rows, top_k, expert_begin,
                                                             local, hidden, shared, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace spark::kernels
