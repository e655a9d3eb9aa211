// Sampling kernel. Thresholds are found exactly by bisection over the bit patterns of
// non-negative floats (monotone in value): the k-th largest probability, then the top-p cut.
// Each bisection step is one pass over the row (vocab / 1024 values per thread).
#include <cooperative_groups.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/sampling.h"

namespace spark::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;

__device__ __forceinline__ float Prob(const float* row, int i, float mx, float inv_t) {
  return expf((row[i] - mx) * inv_t);
}

// Count and mass of p >= t over the row, summed over the block.
__device__ void CountMass(const float* row, int vocab, float mx, float inv_t, float t,
                          float* scratch, float* count, float* mass) {
  float c = 0.0f, m = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = Prob(row, i, mx, inv_t);
    if (p >= t) {
      c += 1.0f;
      m += p;
    }
  }
  *count = detail::BlockSum(c, scratch);
  *mass = detail::BlockSum(m, scratch);
}

// Inclusive scan of one float per thread over the block.
__device__ float BlockInclusiveScan(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float o = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += o;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0f;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float o = __shfl_up_sync(0xffffffffu, w, off);
      if (lane >= off) w += o;
    }
    scratch[lane] = w;
  }
  __syncthreads();
  return v + (warp > 0 ? scratch[warp - 1] : 0.0f);
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* __restrict__ logits, int vocab, SamplingRows params,
                 int32_t* __restrict__ tokens) {
  __shared__ float scratch[32];
  __shared__ float s_val[32];
  __shared__ int s_idx[32];
  __shared__ int s_pick;
  const int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Argmax (ties to the lower id); its value is the max for the softmax too.
  float best = -INFINITY;
  int best_i = vocab;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (row[i] > best) {
      best = row[i];
      best_i = i;
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, off);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, off);
    if (ov > best || (ov == best && oi < best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  if (lane == 0) {
    s_val[warp] = best;
    s_idx[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      if (s_val[w] > s_val[0] || (s_val[w] == s_val[0] && s_idx[w] < s_idx[0])) {
        s_val[0] = s_val[w];
        s_idx[0] = s_idx[w];
      }
    }
  }
  __syncthreads();
  const float mx = s_val[0];
  const float temperature = params.temperature[r];
  if (!(temperature > 0.0f)) {
    if (threadIdx.x == 0) tokens[r] = s_idx[0];
    return;
  }
  const float inv_t = 1.0f / temperature;
  float count, mass;
  // Top-k: the largest threshold t that keeps at least k values.
  float t = 0.0f;
  const int k = params.top_k[r];
  if (k > 0 && k < vocab) {
    uint32_t lo = 0, hi = 0x3f800000u;  // count(p >= 0) = vocab >= k; p <= 1
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      CountMass(row, vocab, mx, inv_t, __uint_as_float(mid), scratch, &count, &mass);
      if (count >= static_cast<float>(k))
        lo = mid;
      else
        hi = mid - 1;
    }
    t = __uint_as_float(lo);
  }
  CountMass(row, vocab, mx, inv_t, t, scratch, &count, &mass);
  const float top_p = params.top_p[r];
  if (top_p < 1.0f) {
    const float need = top_p * mass;
    uint32_t lo = __float_as_uint(t), hi = 0x3f800000u;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      float c, m;
      CountMass(row, vocab, mx, inv_t, __uint_as_float(mid), scratch, &c, &m);
      if (m >= need)
        lo = mid;
      else
        hi = mid - 1;
    }
    t = __uint_as_float(lo);
    CountMass(row, vocab, mx, inv_t, t, scratch, &count, &mass);
  }
  // Inverse CDF over the kept values in id order: thread i owns a contiguous chunk.
  const float target = params.uniform[r] * mass;
  const int chunk = (vocab + blockDim.x - 1) / blockDim.x;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * chunk);
  const int end = min(vocab, begin + chunk);
  float local = 0.0f;
  int last_kept = -1;
  for (int i = begin; i < end; ++i) {
    const float p = Prob(row, i, mx, inv_t);
    if (p >= t) {
      local += p;
      last_kept = i;
    }
  }
  const float inclusive = BlockInclusiveScan(local, scratch);
  const float exclusive = inclusive - local;
  if (threadIdx.x == 0) s_pick = -1;
  __syncthreads();
  if (last_kept >= 0 && exclusive <= target && target < inclusive) {
    float run = exclusive;
    int pick = last_kept;
    for (int i = begin; i < end; ++i) {
      const float p = Prob(row, i, mx, inv_t);
      if (p < t) continue;
      run += p;
      if (target < run) {
        pick = i;
        break;
      }
    }
    atomicMax(&s_pick, pick);
  }
  __syncthreads();
  // Rounding can leave target at or past the total: take the last kept id.
  const int picked = s_pick;
  __syncthreads();
  if (picked < 0 && last_kept >= 0) atomicMax(&s_pick, last_kept);
  __syncthreads();
  if (threadIdx.x == 0) tokens[r] = s_pick >= 0 ? s_pick : s_idx[0];
}

// The running maximum of one thread over its columns, taken in increasing order (so the first
// column of equal values stays).
struct ArgMaxState {
  __device__ explicit ArgMaxState(int width) : index(width) {}
  float value = -INFINITY;
  int index;  // the row's width: "none yet", loses every tie
  int nan = 0;
  __device__ __forceinline__ void Take(float v, int i) {
    nan |= isnan(v) ? 1 : 0;
    if (v > value) {
      value = v;
      index = i;
    }
  }
};

// Blocks a row is split over when it is long (a cluster: the blocks meet in distributed shared
// memory, so there is no second pass or global scratch). One 1024-thread block took a
// 151936-wide row 13.5 us on an H200, a chain of nine rounds of loads.
constexpr int kArgMaxParts = 8;
constexpr int kArgMaxColumnsPerPart = 8192;  // shorter rows stay in one block

// Merges (v, j) into (value, index): the larger value, the lower index between equal ones.
__device__ __forceinline__ void KeepBest(float& value, int& index, float v, int j) {
  if (v > value || (v == value && j < index)) {
    value = v;
    index = j;
  }
}

// vectorized: the row starts 16-byte aligned and vocab is a multiple of 4 (so is each part's
// slice). Each thread keeps kUnroll 16-byte loads in flight (one dependent load at a time took a
// 151936-wide row 58 us on an H200). gridDim.x blocks per row (a cluster when more than one),
// each over a slice of quads; the cluster's first block writes the pair.
__global__ void __launch_bounds__(kThreads)
    ArgMaxKernel(const float* __restrict__ logits, int vocab, int64_t index_offset, bool vectorized,
                 float* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  __shared__ float best_value[kThreads / 32];
  __shared__ int best_index[kThreads / 32];
  __shared__ int block_nan;
  constexpr int kUnroll = 4;
  const int row = blockIdx.y, parts = gridDim.x, part = blockIdx.x;
  const float* x = logits + row * static_cast<int64_t>(vocab);
  ArgMaxState s(vocab);
  const int quads = vectorized ? vocab / 4 : 0;
  const int per = (quads + parts - 1) / parts;
  const int begin = min(quads, part * per), end = min(quads, begin + per);
  const auto* x4 = reinterpret_cast<const float4*>(x);
  for (int q0 = begin + threadIdx.x; q0 < end; q0 += kUnroll * blockDim.x) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = q0 + u * blockDim.x;
      v[u] = q < end ? __ldg(x4 + q) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = 4 * (q0 + u * blockDim.x);
      s.Take(v[u].x, i);
      s.Take(v[u].y, i + 1);
      s.Take(v[u].z, i + 2);
      s.Take(v[u].w, i + 3);
    }
  }
  if (part == parts - 1) {
    for (int i = 4 * quads + threadIdx.x; i < vocab; i += blockDim.x) s.Take(x[i], i);
  }
  float value = s.value;
  int index = s.index;
  for (int off = 16; off > 0; off /= 2) {
    KeepBest(value, index, __shfl_xor_sync(0xffffffffu, value, off),
             __shfl_xor_sync(0xffffffffu, index, off));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_value[warp] = value;
    best_index[warp] = index;
  }
  int any_nan = __syncthreads_or(s.nan);  // also the barrier before thread 0 reads
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) KeepBest(value, index, best_value[w], best_index[w]);
    best_value[0] = value;
    best_index[0] = index;
    block_nan = any_nan;
  }
  if (parts > 1) {
    // The other blocks' bests, read by the first block once all are written; the second sync
    // keeps their shared memory alive until it has.
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (part == 0 && threadIdx.x == 0) {
      for (int b = 1; b < parts; ++b) {
        KeepBest(value, index, *cluster.map_shared_rank(&best_value[0], b),
                 *cluster.map_shared_rank(&best_index[0], b));
        any_nan |= *cluster.map_shared_rank(&block_nan, b);
      }
    }
    cluster.sync();
  }
  if (part == 0 && threadIdx.x == 0) {
    out[2 * row] = any_nan ? NAN : value;
    out[2 * row + 1] = static_cast<float>(index_offset + (index < vocab ? index : 0));
  }
}

}  // namespace

Status ArgMaxPairs(const float* logits, int64_t rows, int vocab, int64_t index_offset, float* out,
                   cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  const bool vectorized = detail::Aligned16(logits) && vocab % 4 == 0;
  const int parts = vectorized && vocab >= kArgMaxParts * kArgMaxColumnsPerPart ? kArgMaxParts : 1;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (detail::DependentLaunchEnabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (parts > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n++].val.clusterDim = {static_cast<unsigned>(parts), 1, 1};
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(parts, static_cast<unsigned>(rows));
  config.blockDim = kThreads;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n;
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernelEx(&config, ArgMaxKernel, logits, vocab, index_offset, vectorized, out));
  return Status::Ok();
}

Status Sample(const float* logits, int64_t rows, int vocab, const SamplingRows& params,
              int32_t* tokens, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  if (vocab <= 0) return InvalidArgumentError("sampling: vocab must be > 0");
  SampleKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, tokens);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace spark::kernels
