// DeepSeek-V4 / V4.1 kernels of the per-token cache: the partial interleaved RoPE, field writes
// at cache slots, the compressors' inputs and their softmax pooling into compressed entries
// (engine/backend/deepseek_op_args.h defines each; engine/backend/cpu/cpu_deepseek_cache.cc is
// the reference). fp32 throughout; all pointers are device pointers. Each function returns
// InvalidArgument for shapes it does not take and Internal for a launch failure.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// A per-token field of a layer's paged cache: `width` floats at base + slot * stride + offset.
struct CacheRows {
  float* base = nullptr;
  int64_t stride = 0;
  int offset = 0;
  int width = 0;
};

// Interleaved partial RoPE: the trailing rope_dim channels of a vector turn in pairs (2i, 2i + 1)
// by position * inv_freq[i], cos and sin times `scale` (sin negated when `inverse`).
struct TrailingRope {
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  int rope_dim = 0;                 // even, at most the vector width
  float scale = 1.0f;
  bool inverse = false;
};

// Rotates x [tokens, heads, dim] in place at positions[t].
Status RopeTrailing(float* x, const int32_t* positions, int64_t tokens, int heads, int dim,
                    const TrailingRope& rope, cudaStream_t stream);

// field[slots[t]] = rows[t] ([tokens, field.width]).
Status WriteCacheRows(const float* rows, const int64_t* slots, int64_t tokens,
                      const CacheRows& field, cudaStream_t stream);

// kv[t] into kv_field and, when gate is set, gate[t] (+ ape[positions[t] % ratio] when ape is
// set) into gate_field, at slots[t]; rows of `width`.
struct CompressorRows {
  const float* kv = nullptr;
  const float* gate = nullptr;
  const float* ape = nullptr;  // [ratio, width]
  int width = 0;
  int ratio = 1;
  CacheRows kv_field, gate_field;
};
Status WriteCompressorRows(const CompressorRows& in, const int32_t* positions, const int64_t* slots,
                           int64_t tokens, cudaStream_t stream);

// Compressed entries (DeepseekOps::Compress): entry e pools the `pool` sources at
// source_slots[e * pool ..] (-1: missing), per channel a softmax over the sources' gates (equal
// weights without a gate field) of their kv; then the RMSNorm (norm set), the RoPE at
// entry_positions[e] (rope.inv_freq set) and the store at entry_slots[e] of `out`, or at
// out_rows + e * dim when out_rows is set. With overlap (fields 2 dim wide) sources from
// pool / 2 on read channels [dim, 2 dim).
struct PoolArgs {
  CacheRows kv, gate;  // gate.base null: equal weights
  int dim = 0;
  int pool = 0;
  bool overlap = false;
  int64_t entries = 0;
  const int64_t* source_slots = nullptr;     // [entries, pool]
  const int64_t* entry_slots = nullptr;      // [entries]; read only for `out`
  const int32_t* entry_positions = nullptr;  // [entries]; read only with a rope
  const float* norm = nullptr;               // [dim]
  float eps = 1e-6f;
  TrailingRope rope;  // inv_freq null: no rotation
  CacheRows out;
  float* out_rows = nullptr;
};
Status PoolEntries(const PoolArgs& a, cudaStream_t stream);

// x[i] = value for i < count.
Status FillFloat(float* x, int64_t count, float value, cudaStream_t stream);

}  // namespace spark::kernels
