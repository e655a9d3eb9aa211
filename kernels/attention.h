// Paged attention over a KV cache laid out as the Backend interface describes: cache slot s
// holds one token's keys (or values) for every KV head, [s, num_kv_heads * head_dim]; token j of
// a sequence lives at slot block_table[j / block_size] * block_size + j % block_size.
//
// Two kernels: decode (one query row per sequence; split-K over the context when there are too
// few rows to fill the GPU, then a combine pass) and prefill (flash-style: tiles of query rows
// of one sequence, causal, online softmax over KV tiles in shared memory). Both serve GQA/MQA:
// query head h reads KV head h / (num_heads / num_kv_heads). fp32 softmax and accumulation.
// Prefill, and decode over a bf16 cache, run either on CUDA cores (exact to ~1e-6 in fp32) or,
// when the layout asks for it, on bf16 tensor cores (Q, K, V and the probabilities rounded to
// bf16: ~3e-3 relative error, far faster); see PagedKvLayout::bf16_tensor_cores.
// All pointers in the structs below are device pointers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

struct PagedKvLayout {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // a multiple of 8, at most 256
  int block_size = 0;
  float scale = 1.0f;
  // Prefill on bf16 tensor cores where it can (head_dim 64 or 128, 16-byte aligned data; the
  // fp32 kernel otherwise), and decode over a bf16 cache too (also at most 16 query heads per
  // KV head). Decode over an fp32 cache is bandwidth-bound on CUDA cores and always exact.
  bool bf16_tensor_cores = false;
};

// The cache's element type C may differ from the activations' T: an fp32 model can keep a bf16
// cache (half the bytes every attention call reads), rounded to nearest even when written.
// Instantiated for (T, C) = (float, float), (bf16, bf16) and (float, bf16).

// Stores k and v rows [tokens, kv_width] at cache slots (slot * kv_width); slots on the device.
template <typename T, typename C>
Status WriteKv(const T* k, const T* v, const int64_t* slots, int64_t tokens, int kv_width,
               C* k_cache, C* v_cache, cudaStream_t stream);

// Decode rows: row i is q/out row row_ids[i] (i itself when row_ids is null); it sees the first
// kv_len[i] tokens of the sequence whose block table starts at block_tables + table_offset[i].
struct DecodeRows {
  const int32_t* row_ids = nullptr;
  const int32_t* kv_len = nullptr;
  const int32_t* table_offset = nullptr;
  const int32_t* block_tables = nullptr;
  int64_t rows = 0;
  int max_kv_len = 0;  // host-side maximum of kv_len, sizes the split-K
};

// How the decode kernel splits the context: `splits` parts of `split_len` tokens.
struct DecodeSplit {
  int splits = 1;
  int split_len = 0;
  size_t workspace_floats = 0;  // fp32 scratch the call needs (0 when splits == 1)
  bool full_grid = false;       // the rows' blocks fill every SM before any split
};
// bf16_cache: the cache holds bf16 (where the tensor-core kernel takes the layout, it reads the
// cache in longer splits).
DecodeSplit PlanDecodeSplit(const DecodeRows& rows, const PagedKvLayout& layout, int sm_count,
                            bool bf16_cache);

// q and out are [*, num_heads * head_dim]. `workspace` holds plan.workspace_floats floats.
// InvalidArgument for an unsupported head_dim. The tensor-core kernel (bf16 cache) reads a row's
// cache entries before its newest (kv_len - 1), the row metadata and the block tables before it
// waits for the kernel launched just before it (launch.cuh): that kernel may write q and each
// row's newest entry (as the decode step's KV write does), nothing else the call reads.
template <typename T, typename C>
Status PagedDecodeAttention(const T* q, const DecodeRows& rows, const C* k_cache, const C* v_cache,
                            const PagedKvLayout& layout, const DecodeSplit& plan, float* workspace,
                            T* out, cudaStream_t stream);

// Prefill: up to kPrefillTileRows consecutive query rows of one sequence. Row i of the tile is
// q/out row row_begin + i and sees kv_len0 + i cache tokens (causal).
constexpr int kPrefillTileRows = 128;
struct PrefillTile {
  int32_t row_begin = 0;
  int32_t rows = 0;
  int32_t kv_len0 = 0;
  int32_t table_offset = 0;
};

// tiles: device array of num_tiles tiles. InvalidArgument for an unsupported head_dim.
template <typename T, typename C>
Status PagedPrefillAttention(const T* q, const PrefillTile* tiles, int num_tiles,
                             const int32_t* block_tables, const C* k_cache, const C* v_cache,
                             const PagedKvLayout& layout, T* out, cudaStream_t stream);

}  // namespace spark::kernels
