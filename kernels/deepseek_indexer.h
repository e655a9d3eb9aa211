// DeepSeek-V4 / V4.1 lightning indexer on the GPU (DeepseekOps::IndexerTopK and
// CandidateBlocks, engine/backend/deepseek_op_args.h; the reference is
// engine/backend/cpu/cpu_deepseek_attention.cc and cpu_deepseek_v41.cc):
//   - IndexerScores: score[t, c] = sum_h ReLU(q[t, h] . key_c) * scale * weights[t, h] *
//     weight_scale (+ mask[t, c]) for every candidate c < count[t], in fp32 on CUDA cores;
//   - RowTopK: the k best of each score row, best first, ties to the lower index, -1 padded
//     (a radix select per row, then a sort of the k chosen);
//   - CandidateBlockMask: level one of the two-level top-k (block maxima, the newest block
//     pinned, the best blocks kept as a 0 / -inf mask).
// All pointers are device pointers. Selections are deterministic: equal inputs give equal
// outputs on every run and every rank. InvalidArgument for shapes the kernels do not take,
// Internal for launch failures.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// The most candidates a row may select (RowTopK's k, CandidateBlockMask's top_blocks).
constexpr int kMaxTopK = 4096;
// The most query heads the score kernel takes.
constexpr int kMaxIndexerHeads = 128;

// Consecutive query rows that share one candidate list (rows of one sequence: each row's
// candidates are a prefix of the list), scored together so each key is read once for them.
struct IndexerGroup {
  int32_t row = 0;      // first query row
  int32_t queries = 0;  // rows in the group, at most IndexerScoreArgs::queries_per_group
  int32_t count = 0;    // the largest candidate count of the group's rows
  int32_t pad = 0;
  int64_t first = 0;  // the list's first entry in `slots`
};

struct IndexerScoreArgs {
  const float* q = nullptr;        // [rows, heads, dim], 16-byte aligned, dim % 4 == 0
  const float* weights = nullptr;  // [rows, heads]
  float scale = 1.0f;              // dim^-0.5
  float weight_scale = 1.0f;
  int heads = 0, dim = 0;
  const float* keys = nullptr;  // key of slot s at keys + s * key_stride
  int64_t key_stride = 0;
  const int64_t* slots = nullptr;  // the candidate lists
  const int32_t* count = nullptr;  // [rows]
  const float* mask = nullptr;     // optional [rows, mask_stride]; -inf drops a candidate
  int64_t mask_stride = 0;
  const IndexerGroup* groups = nullptr;
  int num_groups = 0;
  int queries_per_group = 1;  // set by IndexerQueriesPerGroup
  int max_count = 0;          // the largest count of any group
  float* scores = nullptr;    // out: row t's scores at scores + (t - score_row0) * score_stride
  int64_t score_stride = 0;
  int64_t score_row0 = 0;
  // Optional (CompactCandidates): row t's place j scores candidate
  // candidate_index[(t - score_row0) * index_stride + j] of its list, count[t] places; groups
  // then hold one row each. Null: place j is candidate j.
  const int32_t* candidate_index = nullptr;
  int64_t index_stride = 0;
};

// Rows a group should hold for `heads` heads: one when no two rows share a list (decode),
// more when they do (prefill) so each key serves several rows.
int IndexerQueriesPerGroup(int heads, bool rows_share_lists);

// Writes scores[t, c] for c < count[t]; entries from count[t] on are not touched.
Status IndexerScores(const IndexerScoreArgs& a, cudaStream_t stream);

// For each of `rows` rows: the k largest of values[r, 0 .. count[r]) (count null: `width`
// each) as indices in float, best first, ties to the lower index, written to out[r, 0..k);
// -inf (and NaN) values are never chosen and the places left are -1. With `map`, index i of
// row r is written as map[r * map_stride + i] (an increasing map keeps the tie rule).
// k <= kMaxTopK.
Status RowTopK(const float* values, int64_t stride, const int32_t* count, int width, int64_t rows,
               int k, float* out, cudaStream_t stream, const int32_t* map = nullptr,
               int64_t map_stride = 0);

// For each of `rows` rows: the places c < count[r] whose mask[r, c] is not -inf, in increasing
// order, at index[r, 0..kept[r]) (index_stride ints a row). The masked indexer scores only
// these.
Status CompactCandidates(const float* mask, int64_t mask_stride, const int32_t* count, int64_t rows,
                         int32_t* index, int64_t index_stride, int32_t* kept, cudaStream_t stream);

// Level one of the two-level top-k for `rows` rows of scores [rows, stride]: blocks of
// block_size candidates score their maximum, the block holding candidate count[r] - 1 is pinned
// (+inf), the top_blocks best blocks with a score above -inf are kept (ties to the lower block),
// and mask[r, c] = 0 for c in a kept block, -inf otherwise. `scratch` holds
// CandidateBlockScratchFloats floats. top_blocks <= kMaxTopK.
int64_t CandidateBlockScratchFloats(int64_t rows, int stride, int block_size);
Status CandidateBlockMask(const float* scores, const int32_t* count, int64_t rows, int stride,
                          int block_size, int top_blocks, float* scratch, float* mask,
                          cudaStream_t stream);

}  // namespace spark::kernels
