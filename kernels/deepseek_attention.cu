// Sparse attention with sinks (deepseek_attention.h). A block of 8 warps takes one query row, a
// block of 8 * kHeads heads and one split of the row's keys; warp w owns heads w * kHeads ..
// + kHeads. The split's keys go through shared memory 32 at a time (one key row a lane's worth:
// all 32 keys x head_dim floats, cp.async), so every head of the block reads each key from
// shared memory and the key leaves DRAM once per row:
//  1. scores: lane j takes key j, the warp's heads' q rows come from L1 (the same addresses for
//     every lane), one float4 of key and q at a time;
//  2. an online softmax step per head across the warp (max and sum by shuffles), the running
//     output rescaled;
//  3. values: lane l owns dims 4l + 128r (r < 4) of every head of the warp; key j's
//     probability comes from lane j by a shuffle.
// With one split the block adds the sink and writes the row; with several it writes its
// (max, sum, output) per head and SparseCombineKernel merges them with the sink.
#include <algorithm>
#include <atomic>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_attention.h"
#include "kernels/deepseek_device.cuh"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"

namespace spark::kernels {
namespace {

using detail::Dot4;
using detail::Load4;
using detail::RowAt;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 32;                            // keys staged at a time: one a lane
constexpr int kDimSlices = kMaxSparseHeadDim / 128;  // float4 slices of a lane, 128 dims apart

// Floats of the split states (max, sum per row, split and head) at the start of the workspace,
// rounded up so the partial outputs after them stay 16-byte aligned.
__host__ __device__ inline int64_t StateFloats(int64_t rows, int splits, int heads) {
  return (rows * splits * heads * 2 + 3) / 4 * 4;
}

// The key row of the row's key j, or null when the place is empty (a -1 selection) or j < 0.
__device__ __forceinline__ const float* KeyRow(const SparseAttentionParams& p, const SparseRow& row,
                                               int64_t t, int j) {
  if (j < 0) return nullptr;
  if (j < row.window) {
    const int pos = row.window_first + j;
    return RowAt(p.window_keys, detail::CacheSlot(p.tables + row.table_offset, pos, p.block_size));
  }
  int64_t pick = j - row.window;
  if (p.selected != nullptr) {
    pick = static_cast<int64_t>(p.selected[t * p.top_k + pick]);
    if (pick < 0) return nullptr;
  }
  return RowAt(p.entries, p.slots[row.first + pick]);
}

template <int kHeads>
__global__ void __launch_bounds__(kThreads, 1)
    SparseAttentionKernel(SparseAttentionParams p, int split_keys, bool keys_aligned,
                          float* __restrict__ workspace) {
  detail::WaitForPrecedingKernel();
  extern __shared__ float4 stage4[];
  float* ks = reinterpret_cast<float*>(stage4);  // [kKeys][pitch]
  __shared__ const float* key_rows[kKeys];
  // Each head's running softmax sum (the same in every lane of its warp): kept here rather
  // than in registers, which the output accumulators fill.
  __shared__ float sums[kWarps * kHeads];
  const int64_t t = blockIdx.x;
  const int split = blockIdx.y, splits = gridDim.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int D = p.head_dim, pitch = D + 4;
  const SparseRow row = p.rows[t];
  const int begin = split * split_keys;
  const int end = min(row.window + row.entries, begin + split_keys);
  const int h0 = (blockIdx.z * kWarps + warp) * kHeads;
  // The warp's q rows: head h0 + i at q0 + q_offset(i); heads past the last read head h0's
  // (or the last head's) row and are never written.
  const float* q0 = p.q + (t * p.heads + min(h0, p.heads - 1)) * D;
  auto q_offset = [&](int i) { return h0 + i < p.heads ? i * D : 0; };

  float* l = sums + warp * kHeads;
  float m[kHeads], acc[kHeads][4 * kDimSlices];
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < 4 * kDimSlices; ++e) acc[i][e] = 0.0f;
  }
  for (int base = begin; base < end; base += kKeys) {
    if (threadIdx.x < kKeys) {
      const int j = base + threadIdx.x;
      key_rows[threadIdx.x] = KeyRow(p, row, t, j < end ? j : -1);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kKeys * (D / 4); idx += kThreads) {
      const int j = idx / (D / 4), c = idx % (D / 4) * 4;
      const float* key = key_rows[j];
      float* dst = ks + j * pitch + c;
      if (keys_aligned) {
        detail::CpAsync16(dst, key != nullptr ? key + c : p.q, key != nullptr);
      } else {
        const float4 v = key != nullptr ? Load4(key + c, false) : make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(dst) = v;
      }
    }
    detail::CpAsyncCommit();
    detail::CpAsyncWaitAll();
    __syncthreads();

    // 1. Scores of key `lane` for the warp's heads.
    float s[kHeads] = {};
    const float* key = ks + lane * pitch;
#pragma unroll 2
    for (int c = 0; c < D; c += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(key + c);
#pragma unroll
      for (int i = 0; i < kHeads; ++i) s[i] += Dot4(Load4(q0 + q_offset(i) + c, true), kv);
    }
    const bool present = key_rows[lane] != nullptr;
    // 2. Online softmax across the warp's 32 keys.
    float prob[kHeads];
#pragma unroll
    for (int i = 0; i < kHeads; ++i) {
      const float logit = present ? s[i] * p.scale : -INFINITY;
      const float top = fmaxf(m[i], detail::WarpMax(logit));
      const float base_max = top == -INFINITY ? 0.0f : top;  // nothing visible yet: zeros
      prob[i] = expf(logit - base_max);
      const float alpha = expf(m[i] - base_max);
      const float sum = detail::WarpSum(prob[i]);
      const float l_old = l[i];
      __syncwarp();  // every lane has read the old sum
      if (lane == 0) l[i] = l_old * alpha + sum;
      m[i] = top;
#pragma unroll
      for (int e = 0; e < 4 * kDimSlices; ++e) acc[i][e] *= alpha;
    }
    // 3. Values: the probabilities of key j from lane j.
#pragma unroll 1
    for (int j = 0; j < kKeys; ++j) {
      float pj[kHeads];
#pragma unroll
      for (int i = 0; i < kHeads; ++i) pj[i] = __shfl_sync(0xffffffffu, prob[i], j);
      const float* kj = ks + j * pitch;
#pragma unroll
      for (int r = 0; r < kDimSlices; ++r) {
        const int d = 4 * lane + 128 * r;
        if (d >= D) break;
        const float4 kv = *reinterpret_cast<const float4*>(kj + d);
#pragma unroll
        for (int i = 0; i < kHeads; ++i) {
          acc[i][4 * r] += pj[i] * kv.x;
          acc[i][4 * r + 1] += pj[i] * kv.y;
          acc[i][4 * r + 2] += pj[i] * kv.z;
          acc[i][4 * r + 3] += pj[i] * kv.w;
        }
      }
    }
    __syncthreads();  // the stage is rewritten next
  }

  const int64_t state_base = (t * splits + split) * p.heads;
  float* partial_acc = workspace + StateFloats(p.num_rows, splits, p.heads);
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
    const int h = h0 + i;
    if (h >= p.heads) break;
    float factor = 1.0f;  // with one split: the sink and the normalisation
    if (splits == 1) {
      const float sink = p.sinks[h], top = fmaxf(m[i], sink);
      const float f = top == -INFINITY ? 0.0f : expf(m[i] - top);
      const float denom = l[i] * f + (top == -INFINITY ? 0.0f : expf(sink - top));
      factor = denom > 0.0f ? f / denom : 0.0f;
    } else if (lane == 0) {
      workspace[(state_base + h) * 2] = m[i];
      workspace[(state_base + h) * 2 + 1] = l[i];
    }
    float* o = splits == 1 ? p.out + (t * p.heads + h) * D : partial_acc + (state_base + h) * D;
#pragma unroll
    for (int r = 0; r < kDimSlices; ++r) {
      const int d = 4 * lane + 128 * r;
      if (d >= D) break;
      *reinterpret_cast<float4*>(o + d) =
          make_float4(acc[i][4 * r] * factor, acc[i][4 * r + 1] * factor,
                      acc[i][4 * r + 2] * factor, acc[i][4 * r + 3] * factor);
    }
  }
}

// Merges the splits of one (row, head) with its sink: a thread per four dims.
__global__ void SparseCombineKernel(SparseAttentionParams p, int splits,
                                    const float* __restrict__ workspace) {
  detail::WaitForPrecedingKernel();
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y, D = p.head_dim;
  const float* states = workspace + (t * splits * p.heads + h) * 2;  // split s at + s * heads * 2
  const float* partial = workspace + StateFloats(p.num_rows, splits, p.heads);
  const float sink = p.sinks[h];
  float top = sink;
  for (int s = 0; s < splits; ++s) top = fmaxf(top, states[s * p.heads * 2]);
  float denom = top == -INFINITY ? 0.0f : expf(sink - top);
  for (int s = 0; s < splits; ++s) {
    const float m = states[s * p.heads * 2];
    if (m != -INFINITY) denom += states[s * p.heads * 2 + 1] * expf(m - top);
  }
  for (int d = 4 * threadIdx.x; d < D; d += 4 * blockDim.x) {
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < splits; ++s) {
      const float m = states[s * p.heads * 2];
      if (m == -INFINITY) continue;
      const float f = expf(m - top);
      const float4 a = Load4(partial + ((t * splits + s) * p.heads + h) * D + d, true);
      o.x += f * a.x;
      o.y += f * a.y;
      o.z += f * a.z;
      o.w += f * a.w;
    }
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    *reinterpret_cast<float4*>(p.out + (t * p.heads + h) * D + d) =
        make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
  }
}

template <int kHeads>
Status Launch(const SparseAttentionParams& p, const SparseAttentionPlan& plan, bool keys_aligned,
              float* workspace, cudaStream_t stream) {
  // The opt-in is the most any head_dim takes: the attribute is set once per device, and a
  // launch asking for more than it would fail (cudaErrorInvalidValue).
  static std::atomic<uint64_t> configured{0};
  constexpr size_t kMostSmem = sizeof(float) * kKeys * (kMaxSparseHeadDim + 4);
  const size_t smem = sizeof(float) * kKeys * (p.head_dim + 4);
  SPARK_RETURN_IF_ERROR(
      detail::AllowSharedMemory(SparseAttentionKernel<kHeads>, kMostSmem, configured));
  const dim3 grid(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(plan.splits),
                  static_cast<unsigned>(plan.head_blocks));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(SparseAttentionKernel<kHeads>, grid, kThreads,
                                                     smem, stream, p, plan.split_keys, keys_aligned,
                                                     workspace));
  return Status::Ok();
}

}  // namespace

SparseAttentionPlan PlanSparseAttention(int64_t rows, int heads, int head_dim, int max_keys,
                                        int sm_count) {
  SparseAttentionPlan plan;
  plan.heads_per_warp =
      heads <= kWarps ? 1 : (heads <= 2 * kWarps ? 2 : (heads <= 4 * kWarps ? 4 : 8));
  const int chunks = std::max(1, (max_keys + kKeys - 1) / kKeys);
  // A block's warps take heads_per_warp heads each, so a block reads each key once for all of
  // them. With few rows (decode) that leaves most SMs idle even at the most splits: then fewer
  // heads a warp, more head blocks (each reads the keys again, from L2).
  auto blocks = [&](int per_warp) {
    const int per_block = kWarps * per_warp;
    return rows * ((heads + per_block - 1) / per_block) * std::max(1, chunks / 2);
  };
  while (plan.heads_per_warp > 1 && blocks(plan.heads_per_warp) < 2 * sm_count) {
    plan.heads_per_warp /= 2;
  }
  const int per_block = kWarps * plan.heads_per_warp;
  plan.head_blocks = std::max(1, (heads + per_block - 1) / per_block);
  const int64_t work = std::max<int64_t>(1, rows * plan.head_blocks);
  int splits = 1;
  if (work < 2 * sm_count) {
    // Enough blocks for two waves' worth of SMs, each split at least two chunks of keys.
    splits = static_cast<int>(
        std::min<int64_t>((2 * sm_count + work - 1) / work, std::max(1, chunks / 2)));
  }
  const int chunks_per_split = (chunks + splits - 1) / splits;
  plan.split_keys = chunks_per_split * kKeys;
  plan.splits = (chunks + chunks_per_split - 1) / chunks_per_split;
  if (plan.splits > 1) {
    plan.workspace_floats = static_cast<size_t>(StateFloats(rows, plan.splits, heads)) +
                            static_cast<size_t>(rows) * plan.splits * heads * head_dim;
  }
  return plan;
}

Status SparseAttention(const SparseAttentionParams& p, const SparseAttentionPlan& plan,
                       float* workspace, cudaStream_t stream) {
  if (p.head_dim <= 0 || p.head_dim % 4 != 0 || p.head_dim > kMaxSparseHeadDim || p.heads <= 0 ||
      !detail::Aligned16(p.q) || !detail::Aligned16(p.out)) {
    return InvalidArgumentError("sparse attention: " + std::to_string(p.heads) + " heads of " +
                                std::to_string(p.head_dim) + " (head_dim a multiple of 4 up to " +
                                std::to_string(kMaxSparseHeadDim) + ", q and out 16-byte aligned)");
  }
  if (p.num_rows <= 0) return Status::Ok();
  if (p.num_rows > INT32_MAX || plan.splits > 65535 || plan.head_blocks > 65535) {
    return InvalidArgumentError("sparse attention: too many rows, splits or head blocks");
  }
  if (plan.splits > 1 && workspace == nullptr) {
    return InvalidArgumentError("sparse attention: a split plan needs its workspace");
  }
  const bool keys_aligned = detail::RowsAligned(p.window_keys) &&
                            (p.entries.base == nullptr || detail::RowsAligned(p.entries));
  switch (plan.heads_per_warp) {
    case 1:
      SPARK_RETURN_IF_ERROR(Launch<1>(p, plan, keys_aligned, workspace, stream));
      break;
    case 2:
      SPARK_RETURN_IF_ERROR(Launch<2>(p, plan, keys_aligned, workspace, stream));
      break;
    case 4:
      SPARK_RETURN_IF_ERROR(Launch<4>(p, plan, keys_aligned, workspace, stream));
      break;
    case 8:
      SPARK_RETURN_IF_ERROR(Launch<8>(p, plan, keys_aligned, workspace, stream));
      break;
    default:
      return InvalidArgumentError("sparse attention: heads_per_warp " +
                                  std::to_string(plan.heads_per_warp) + " (1, 2, 4 or 8)");
  }
  if (plan.splits == 1) return Status::Ok();
  const int threads = std::min(128, std::max(32, (p.head_dim / 4 + 31) / 32 * 32));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      SparseCombineKernel, dim3(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(p.heads)),
      threads, 0, stream, p, plan.splits, static_cast<const float*>(workspace)));
  return Status::Ok();
}

}  // namespace spark::kernels
