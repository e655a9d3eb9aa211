// Row-wise top-k selection (deepseek_indexer.h: RowTopK, CandidateBlockMask). One block of 1024
// threads per row:
//  1. a radix select on 32-bit keys that order the floats (-0 as +0; -inf and NaN key 0, never
//     chosen): three passes of 11, 11 and 10 bits, each a shared-memory histogram of the keys
//     that match the digits found so far (lanes with equal bins add once, so rows of equal
//     scores do not serialise on one counter), until the k-th largest key is known exactly;
//     rows with at most k candidates skip straight to collecting them all;
//  2. one pass in index order collects the keys above that threshold and, of the keys equal to
//     it, the lowest indices (a block-wide prefix count), which is the reference's tie rule;
//  3. a bitonic sort of the chosen (key, index) pairs, best first (skipped for the block mask,
//     which only needs the set).
// CompactCandidates lists each row's unmasked places in order with the same block-wide ranks.
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_indexer.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 2048;  // 11-bit digits

struct SelectShared {
  uint32_t hist[kBins];
  uint64_t chosen[kMaxTopK];  // (key << 32) | (0xFFFFFFFF - index): larger is better
  int warp_counts[kWarps];
  uint32_t prefix, prefix_mask;  // the threshold's digits found so far, and their bits
  int remaining;                 // keys equal to the prefix still to take
  int total;                     // candidates with key > 0 (pass 0)
  int take_all;                  // at most k candidates: take every one
  int num_above;                 // keys above the threshold collected so far
  int eq_taken;                  // keys equal to the threshold seen so far, in index order
};

// A key whose unsigned order is the float order; 0 for values never chosen.
__device__ __forceinline__ uint32_t OrderKey(float v) {
  if (!(v > -INFINITY)) return 0u;  // -inf and NaN
  if (v == 0.0f) v = 0.0f;          // -0 ties with +0, as float comparison has it
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t Pack(uint32_t key, int index) {
  return (uint64_t{key} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(index));
}

__device__ __forceinline__ int IndexOf(uint64_t packed) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(packed));
}

// The rank of this thread's `flag` among the set flags of the block in thread order, and in
// *total their count. Every thread calls it; warp_counts holds one int a warp.
__device__ int BlockRank(bool flag, int* warp_counts, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0) warp_counts[warp] = __popc(ballot);
  __syncthreads();
  int rank = __popc(ballot & ((1u << lane) - 1u)), sum = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
    if (w < warp) rank += warp_counts[w];
    sum += warp_counts[w];
  }
  *total = sum;
  __syncthreads();  // warp_counts may be written again
  return rank;
}

// Warp 0: from the histogram of this pass (bins of `digit_mask + 1`), the digit of the
// `remaining`-th largest matching key; updates prefix, prefix_mask and remaining. On the first
// pass, notes the candidate total and whether all of them fit in k.
__device__ void FindDigit(SelectShared& s, int shift, uint32_t digit_mask, bool first_pass, int k) {
  const int lane = threadIdx.x % 32;
  const int bins = static_cast<int>(digit_mask) + 1, per_lane = bins / 32;
  const int top = bins - lane * per_lane;  // this lane's bins: [top - per_lane, top)
  uint32_t mine = 0;
  for (int b = top - per_lane; b < top; ++b) mine += s.hist[b];
  uint32_t inclusive = mine;  // from the highest bins (lane 0) down
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  const uint32_t total = __shfl_sync(0xffffffffu, inclusive, 31);
  if (first_pass) {
    if (lane == 0) {
      s.total = static_cast<int>(total);
      s.take_all = total <= static_cast<uint32_t>(k);
    }
    if (total <= static_cast<uint32_t>(k)) return;
  }
  const uint32_t remaining = static_cast<uint32_t>(s.remaining);
  const unsigned crossing = __ballot_sync(0xffffffffu, inclusive >= remaining);
  if (lane != __ffs(crossing) - 1) return;
  uint32_t above = inclusive - mine;  // keys in higher bins
  for (int b = top - 1; b >= top - per_lane; --b) {
    if (above + s.hist[b] >= remaining) {
      s.prefix |= static_cast<uint32_t>(b) << shift;
      s.prefix_mask |= digit_mask << shift;
      s.remaining = static_cast<int>(remaining - above);
      return;
    }
    above += s.hist[b];
  }
}

// Chooses the k best of v[0, n) into s.chosen (unordered) and returns how many were chosen
// (min(k, candidates)). Every thread of the block calls it.
__device__ int SelectRow(const float* __restrict__ v, int n, int k, SelectShared& s) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) {
    s.prefix = s.prefix_mask = 0;
    s.remaining = k;
    s.num_above = s.eq_taken = 0;
  }
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const uint32_t digit_mask = pass == 2 ? 0x3FFu : 0x7FFu;
    for (int b = tid; b < kBins; b += blockDim.x) s.hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s.prefix, prefix_mask = s.prefix_mask;
    for (int base = 0; base < n; base += blockDim.x) {  // whole warps: the match is warp-wide
      const int i = base + tid;
      const uint32_t key = i < n ? OrderKey(v[i]) : 0u;
      const bool counts = key != 0 && (key & prefix_mask) == prefix;
      const uint32_t bin = counts ? (key >> shift) & digit_mask : 0xFFFFFFFFu;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (counts && lane == __ffs(peers) - 1) atomicAdd(&s.hist[bin], __popc(peers));
    }
    __syncthreads();
    if (warp == 0) FindDigit(s, shift, digit_mask, pass == 0, k);
    __syncthreads();
    if (s.take_all) break;
  }
  // The threshold: every key above it is chosen, and the first `take_equal` keys equal to it.
  const bool all = s.take_all;
  const uint32_t threshold = all ? 0u : s.prefix;
  const int take_equal = all ? 0 : s.remaining;
  const int above_total = all ? s.total : k - take_equal;
  for (int base = 0; base < n; base += blockDim.x) {
    const int i = base + tid;
    const uint32_t key = i < n ? OrderKey(v[i]) : 0u;
    if (key > threshold) s.chosen[atomicAdd(&s.num_above, 1)] = Pack(key, i);
    if (take_equal > 0) {
      const bool equal = key == threshold;
      if (__syncthreads_count(equal) > 0) {
        const int taken = s.eq_taken;
        int count = 0;
        const int rank = taken + BlockRank(equal, s.warp_counts, &count);
        if (equal && rank < take_equal) s.chosen[above_total + rank] = Pack(key, i);
        if (tid == 0) s.eq_taken = taken + count;  // every thread has read it (BlockRank syncs)
      }
    }
    __syncthreads();
    if (__syncthreads_and(s.num_above == above_total && s.eq_taken >= take_equal)) break;
  }
  __syncthreads();
  return all ? s.total : k;
}

// Sorts s.chosen[0, count) descending (best first) in place.
__device__ void SortChosen(SelectShared& s, int count) {
  int size = 1;
  while (size < count) size <<= 1;
  for (int i = count + threadIdx.x; i < size; i += blockDim.x) s.chosen[i] = 0;  // below any key
  __syncthreads();
  for (int block = 2; block <= size; block <<= 1) {
    for (int stride = block / 2; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const uint64_t a = s.chosen[i], b = s.chosen[j];
        const bool descending = (i & block) == 0;
        if (descending ? a < b : a > b) {
          s.chosen[i] = b;
          s.chosen[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    RowTopKKernel(const float* __restrict__ values, int64_t stride, const int32_t* count, int width,
                  int k, const int32_t* __restrict__ map, int64_t map_stride,
                  float* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  __shared__ SelectShared s;
  const int64_t r = blockIdx.x;
  const int n = count != nullptr ? max(0, min(count[r], width)) : width;
  const int chosen = SelectRow(values + r * stride, n, k, s);
  SortChosen(s, chosen);
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    float index = -1.0f;
    if (j < chosen) {
      const int i = IndexOf(s.chosen[j]);
      index = static_cast<float>(map != nullptr ? map[r * map_stride + i] : i);
    }
    out[r * k + j] = index;
  }
}

// Row r's places c < count[r] whose mask is not -inf, in order, at index[r * index_stride ..];
// their number at kept[r].
__global__ void __launch_bounds__(kThreads)
    CompactKernel(const float* __restrict__ mask, int64_t mask_stride,
                  const int32_t* __restrict__ count, int32_t* __restrict__ index,
                  int64_t index_stride, int32_t* __restrict__ kept) {
  detail::WaitForPrecedingKernel();
  __shared__ int warp_counts[kWarps];
  const int64_t r = blockIdx.x;
  const int n = count[r];
  const float* m = mask + r * mask_stride;
  int taken = 0;  // the same in every thread
  for (int base = 0; base < n; base += blockDim.x) {
    const int c = base + threadIdx.x;
    const bool keep = c < n && m[c] != -INFINITY;
    int total = 0;
    const int rank = BlockRank(keep, warp_counts, &total);
    if (keep) index[r * index_stride + taken + rank] = c;
    taken += total;
  }
  if (threadIdx.x == 0) kept[r] = taken;
}

// Block maxima of each row ([rows, blocks]); the block of the newest candidate pinned at +inf.
__global__ void BlockMaxKernel(const float* __restrict__ scores, const int32_t* __restrict__ count,
                               int64_t rows, int stride, int block_size, int blocks,
                               float* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * blocks;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / blocks;
    const int b = static_cast<int>(i % blocks);
    float max = -INFINITY;
    for (int c = b * block_size; c < min(stride, (b + 1) * block_size); ++c) {
      max = fmaxf(max, scores[r * stride + c]);
    }
    if (count[r] > 0 && b == (count[r] - 1) / block_size) max = INFINITY;
    out[i] = max;
  }
}

__global__ void __launch_bounds__(kThreads)
    BlockMaskKernel(const float* __restrict__ block_max, int blocks, int k, int stride,
                    int block_size, float* __restrict__ mask) {
  detail::WaitForPrecedingKernel();
  __shared__ SelectShared s;
  const int64_t r = blockIdx.x;
  const int chosen = k > 0 ? SelectRow(block_max + r * blocks, blocks, k, s) : 0;
  float* row = mask + r * stride;
  for (int c = threadIdx.x; c < stride; c += blockDim.x) row[c] = -INFINITY;
  __syncthreads();  // the kept blocks' zeros land after the fill
  for (int i = threadIdx.x; i < chosen * block_size; i += blockDim.x) {
    const int c = IndexOf(s.chosen[i / block_size]) * block_size + i % block_size;
    if (c < stride) row[c] = 0.0f;
  }
}

unsigned GridFor(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::CeilDiv(items, 256), 1, 65536));
}

Status CheckRows(int64_t rows) {
  if (rows > INT32_MAX) return InvalidArgumentError("top-k: too many rows in one call");
  return Status::Ok();
}

}  // namespace

Status RowTopK(const float* values, int64_t stride, const int32_t* count, int width, int64_t rows,
               int k, float* out, cudaStream_t stream, const int32_t* map, int64_t map_stride) {
  if (k < 0 || k > kMaxTopK) {
    return InvalidArgumentError("top-k: k = " + std::to_string(k) + " (the kernel selects 0 to " +
                                std::to_string(kMaxTopK) + " a row)");
  }
  SPARK_RETURN_IF_ERROR(CheckRows(rows));
  if (rows <= 0 || k == 0) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(RowTopKKernel, static_cast<unsigned>(rows),
                                                     kThreads, 0, stream, values, stride, count,
                                                     std::max(width, 0), k, map, map_stride, out));
  return Status::Ok();
}

Status CompactCandidates(const float* mask, int64_t mask_stride, const int32_t* count, int64_t rows,
                         int32_t* index, int64_t index_stride, int32_t* kept, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckRows(rows));
  if (rows <= 0) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(CompactKernel, static_cast<unsigned>(rows),
                                                     kThreads, 0, stream, mask, mask_stride, count,
                                                     index, index_stride, kept));
  return Status::Ok();
}

int64_t CandidateBlockScratchFloats(int64_t rows, int stride, int block_size) {
  if (block_size <= 0) return 0;
  return rows * ((int64_t{stride} + block_size - 1) / block_size);
}

Status CandidateBlockMask(const float* scores, const int32_t* count, int64_t rows, int stride,
                          int block_size, int top_blocks, float* scratch, float* mask,
                          cudaStream_t stream) {
  if (block_size <= 0 || stride < 0) {
    return InvalidArgumentError("candidate blocks: block_size " + std::to_string(block_size) +
                                " must be positive");
  }
  SPARK_RETURN_IF_ERROR(CheckRows(rows));
  if (rows <= 0 || stride == 0) return Status::Ok();
  const int blocks = (stride + block_size - 1) / block_size;
  const int k = std::max(0, std::min(top_blocks, blocks));
  if (k > kMaxTopK) {
    return InvalidArgumentError("candidate blocks: top_blocks " + std::to_string(top_blocks) +
                                " over " + std::to_string(blocks) + " blocks (the kernel keeps " +
                                "at most " + std::to_string(kMaxTopK) + ")");
  }
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(BlockMaxKernel, GridFor(rows * blocks), 256, 0,
                                                     stream, scores, count, rows, stride,
                                                     block_size, blocks, scratch));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      BlockMaskKernel, static_cast<unsigned>(rows), kThreads, 0, stream,
      static_cast<const float*>(scratch), blocks, k, stride, block_size, mask));
  return Status::Ok();
}

}  // namespace spark::kernels
