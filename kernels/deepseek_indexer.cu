// The lightning indexer's scores (deepseek_indexer.h: IndexerScores) on CUDA cores in fp32.
// For a group of query rows sharing one candidate list, the scores are a small GEMM, rows =
// (query, head) pairs (heads padded to a power of two >= 8) times columns = candidates over the
// head dim, followed by ReLU, the per-head weights and a sum over each query's heads. A block of
// 256 threads takes M = queries x padded heads rows (32, 64 or 128) and 8192 / M candidates;
// each thread holds 8 rows (heads of one query) x 4 candidates in registers. q rows and the
// candidates' keys are staged in shared memory 32 dims at a time, so each key is read from
// memory once per group (every head of every query of the group uses it). The sum over heads
// ends with shuffles between the threads of one query (a fixed order: deterministic).
// Candidates every query of the group masks out (-inf) are not read; a tile with none left
// writes -inf and stops. With a candidate index (the masked indexer's unmasked places, see
// CompactCandidates) a one-row group scores only those.
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_device.cuh"
#include "kernels/deepseek_indexer.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

using detail::Dot4;
using detail::Load4;

constexpr int kThreads = 256;
constexpr int kRowsPerThread = 8;   // heads of one query
constexpr int kCandsPerThread = 4;  // candidates a thread, col_groups apart
constexpr int kTileProduct = kThreads * kRowsPerThread * kCandsPerThread;  // rows x candidates
constexpr int kMinRows = 32, kMaxRows = 128;
constexpr int kMaxTile = kTileProduct / kMinRows;  // candidates of a block
constexpr int kChunk = 32;                         // dims staged at a time
constexpr int kPitch = kChunk + 4;  // floats a staged row: rows 4 banks apart, 16-byte aligned

int PaddedHeads(int heads) {
  int padded = kRowsPerThread;
  while (padded < heads) padded *= 2;
  return padded;
}

// The candidate that row t's place scores (deepseek_indexer.h: candidate_index).
__device__ __forceinline__ int64_t CandidateOf(const IndexerScoreArgs& a, int64_t t, int place) {
  if (a.candidate_index == nullptr) return place;
  return a.candidate_index[(t - a.score_row0) * a.index_stride + place];
}

__global__ void __launch_bounds__(kThreads)
    IndexerScoreKernel(IndexerScoreArgs a, int padded_heads, bool keys_aligned) {
  detail::WaitForPrecedingKernel();
  __shared__ __align__(16) float stage[(kMinRows + kMaxTile) * kPitch];
  __shared__ const float* key_rows[kMaxTile];
  const IndexerGroup g = a.groups[blockIdx.x];
  const int rows = a.queries_per_group * padded_heads;
  const int row_groups = rows / kRowsPerThread, col_groups = kThreads / row_groups;
  const int tile = kCandsPerThread * col_groups;
  const int tile0 = static_cast<int>(blockIdx.y) * tile;
  if (tile0 >= g.count) return;  // the whole block
  const int tid = threadIdx.x;

  // The tile's keys that some query of the group still needs (in its count, not masked out).
  // With a candidate index the group is one row, whose places map to its candidates.
  bool any = false;
  for (int j = tid; j < tile; j += kThreads) {
    const int place = tile0 + j;
    int64_t candidate = place;
    bool needed = false;
    for (int qi = 0; qi < g.queries; ++qi) {
      const int64_t t = int64_t{g.row} + qi;
      if (place >= a.count[t]) continue;
      candidate = CandidateOf(a, t, place);
      needed = needed || a.mask == nullptr || a.mask[t * a.mask_stride + candidate] != -INFINITY;
    }
    key_rows[j] = needed ? a.keys + a.slots[g.first + candidate] * a.key_stride : nullptr;
    any = any || needed;
  }
  if (!__syncthreads_or(any)) {
    for (int idx = tid; idx < g.queries * tile; idx += kThreads) {
      const int64_t t = int64_t{g.row} + idx / tile;
      const int place = tile0 + idx % tile;
      if (place < a.count[t]) a.scores[(t - a.score_row0) * a.score_stride + place] = -INFINITY;
    }
    return;
  }

  // Staged rows: q row r = (query r / padded_heads, head r % padded_heads) at physical row
  // (r % 8) * row_groups + r / 8, so the 8 rows of one thread are row_groups apart and the
  // threads of a quarter warp read consecutive rows (distinct banks); then the keys.
  float* qs = stage;
  float* ks = stage + rows * kPitch;
  const int rg = tid % row_groups, cg = tid / row_groups;
  float acc[kRowsPerThread][kCandsPerThread] = {};
  for (int d0 = 0; d0 < a.dim; d0 += kChunk) {
    for (int idx = tid; idx < rows * (kChunk / 4); idx += kThreads) {
      const int r = idx / (kChunk / 4), c = idx % (kChunk / 4) * 4, d = d0 + c;
      const int qi = r / padded_heads, h = r % padded_heads;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (qi < g.queries && h < a.heads && d < a.dim) {
        v = Load4(a.q + ((int64_t{g.row} + qi) * a.heads + h) * a.dim + d, true);
      }
      const int physical = (r % kRowsPerThread) * row_groups + r / kRowsPerThread;
      *reinterpret_cast<float4*>(qs + physical * kPitch + c) = v;
    }
    for (int idx = tid; idx < tile * (kChunk / 4); idx += kThreads) {
      const int j = idx / (kChunk / 4), c = idx % (kChunk / 4) * 4, d = d0 + c;
      const float* key = key_rows[j];
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (key != nullptr && d < a.dim) v = Load4(key + d, keys_aligned);
      *reinterpret_cast<float4*>(ks + j * kPitch + c) = v;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kChunk; c += 4) {
      float4 qv[kRowsPerThread], kv[kCandsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        qv[i] = *reinterpret_cast<const float4*>(qs + (i * row_groups + rg) * kPitch + c);
      }
#pragma unroll
      for (int n = 0; n < kCandsPerThread; ++n) {
        kv[n] = *reinterpret_cast<const float4*>(ks + (cg + n * col_groups) * kPitch + c);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
        for (int n = 0; n < kCandsPerThread; ++n) acc[i][n] += Dot4(qv[i], kv[n]);
    }
    __syncthreads();
  }

  // ReLU, the head weights, the sum over this thread's heads and then over the query's threads
  // (adjacent lanes: row groups are the low bits of the thread index).
  const int first_row = rg * kRowsPerThread;
  const int qi = first_row / padded_heads, h0 = first_row % padded_heads;
  const bool valid = qi < g.queries;
  const int64_t t = int64_t{g.row} + qi;
  float part[kCandsPerThread] = {};
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int h = h0 + i;
    if (!valid || h >= a.heads) continue;
    const float w = a.weights[t * a.heads + h] * a.weight_scale;
#pragma unroll
    for (int n = 0; n < kCandsPerThread; ++n) part[n] += fmaxf(acc[i][n], 0.0f) * a.scale * w;
  }
  const int lanes_per_query = padded_heads / kRowsPerThread;
  for (int offset = 1; offset < lanes_per_query; offset <<= 1) {
#pragma unroll
    for (int n = 0; n < kCandsPerThread; ++n) {
      part[n] += __shfl_xor_sync(0xffffffffu, part[n], offset);
    }
  }
  if (!valid || rg % lanes_per_query != 0) return;
  const int count = a.count[t];
#pragma unroll
  for (int n = 0; n < kCandsPerThread; ++n) {
    const int place = tile0 + cg + n * col_groups;
    if (place >= count) continue;
    float score = part[n];
    if (a.mask != nullptr) score += a.mask[t * a.mask_stride + CandidateOf(a, t, place)];
    a.scores[(t - a.score_row0) * a.score_stride + place] = score;
  }
}

}  // namespace

int IndexerQueriesPerGroup(int heads, bool rows_share_lists) {
  const int padded = PaddedHeads(heads);
  if (padded >= kMaxRows) return 1;
  return rows_share_lists ? kMaxRows / padded : std::max(1, kMinRows / padded);
}

Status IndexerScores(const IndexerScoreArgs& a, cudaStream_t stream) {
  if (a.heads <= 0 || a.heads > kMaxIndexerHeads || a.dim <= 0 || a.dim % 4 != 0 ||
      !detail::Aligned16(a.q)) {
    return InvalidArgumentError("indexer scores: " + std::to_string(a.heads) + " heads of " +
                                std::to_string(a.dim) + " (takes 1 to " +
                                std::to_string(kMaxIndexerHeads) +
                                " heads, dim a multiple of 4, q 16-byte aligned)");
  }
  const int padded = PaddedHeads(a.heads);
  const int rows = a.queries_per_group * padded;
  if (rows < kMinRows || rows > kMaxRows || (rows & (rows - 1)) != 0) {
    return InvalidArgumentError("indexer scores: " + std::to_string(a.queries_per_group) +
                                " queries a group of " + std::to_string(padded) +
                                " padded heads (use IndexerQueriesPerGroup)");
  }
  if (a.num_groups <= 0 || a.max_count <= 0) return Status::Ok();
  const int tile = kTileProduct / rows;
  const int64_t tiles = (int64_t{a.max_count} + tile - 1) / tile;
  if (tiles > 65535) {
    return InvalidArgumentError("indexer scores: " + std::to_string(a.max_count) +
                                " candidates a query (at most " + std::to_string(65535 * tile) +
                                ")");
  }
  const bool keys_aligned = detail::Aligned16(a.keys) && a.key_stride % 4 == 0;
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      IndexerScoreKernel, dim3(static_cast<unsigned>(a.num_groups), static_cast<unsigned>(tiles)),
      kThreads, 0, stream, a, padded, keys_aligned));
  return Status::Ok();
}

}  // namespace spark::kernels
