// DeepSeek-V4 / V4.1 sparse attention on the GPU (DeepseekOps::SparseAttention,
// engine/backend/deepseek_op_args.h; the reference is
// engine/backend/cpu/cpu_deepseek_attention.cc): each query row attends its sliding window (through
// the paged block table) and its compressed entries (all candidates, or a selection from
// IndexerTopK with -1 skipped), one shared KV head whose keys are the values, with a per-head sink
// logit that takes probability mass and adds no value. fp32 on CUDA cores: a block takes one query
// row and up to 64 of its heads and reads each key once for all of them (MQA); long key lists split
// over blocks whose partial softmax states a second kernel merges. All pointers are device
// pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/deepseek_cache.h"

namespace spark::kernels {

// The widest head the kernel takes (a warp's lanes hold 16 dims each).
constexpr int kMaxSparseHeadDim = 512;

// One query row's keys: window keys at positions window_first .. window_first + window - 1
// (through its block table), then `entries` entry places: selected[row, 0..entries) when a
// selection is given (entries = top_k), else candidates 0..entries of its list.
struct SparseRow {
  int32_t table_offset = 0;  // the row's block table in SparseAttentionParams::tables
  int32_t window_first = 0;
  int32_t window = 0;
  int32_t entries = 0;
  int64_t first = 0;  // the row's candidate list at slots + first
};

struct SparseAttentionParams {
  const float* q = nullptr;  // [rows, heads, head_dim], 16-byte aligned
  int heads = 0, head_dim = 0;
  float scale = 1.0f;
  const SparseRow* rows = nullptr;
  int64_t num_rows = 0;
  const int32_t* tables = nullptr;
  int block_size = 0;
  CacheRows window_keys;            // [head_dim] per token slot
  CacheRows entries;                // [head_dim] per entry slot
  const int64_t* slots = nullptr;   // candidate lists
  const float* selected = nullptr;  // optional [rows, top_k]
  int top_k = 0;
  const float* sinks = nullptr;  // [heads]
  float* out = nullptr;          // [rows, heads, head_dim], 16-byte aligned
};

// How the call splits: rows x head blocks x splits blocks, each split `split_keys` keys.
struct SparseAttentionPlan {
  int heads_per_warp = 1;  // 1, 2, 4 or 8: a block serves 8 warps' worth of heads
  int head_blocks = 1;
  int splits = 1;
  int split_keys = 0;
  size_t workspace_floats = 0;  // fp32 scratch for the split states (0 with one split)
};
// max_keys: the most keys of any row (window + entries).
SparseAttentionPlan PlanSparseAttention(int64_t rows, int heads, int head_dim, int max_keys,
                                        int sm_count);

// InvalidArgument for head_dim not a multiple of 4 or above kMaxSparseHeadDim, or unaligned
// q/out; `workspace` holds plan.workspace_floats floats.
Status SparseAttention(const SparseAttentionParams& p, const SparseAttentionPlan& plan,
                       float* workspace, cudaStream_t stream);

}  // namespace spark::kernels
