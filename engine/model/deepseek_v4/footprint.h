// Memory a DeepSeek-V4 model needs on one rank when served: the weights a rank holds under the
// tensor-parallel plan (PlanShard), counted in the released checkpoint's storage types, and the
// KV cache of a serving layout (a fixed window ring per sequence plus compressed entries and
// indexer keys that grow with the sequence). Used for capacity planning (profiles, docs); the
// CPU reference backend itself keeps fp32 copies (4x the weight bytes here) and the per-token
// record of cache_layout.h.
//
// Storage types, as released: wq_a, wq_b, wkv, wo_a, wo_b and the shared expert in FP8 E4M3 with
// one UE8M0 byte per 128x128 block; routed experts packed e2m1 (half a byte) with one E8M0 byte
// per 32 inputs; mHC mixing weights fp32; tid2eid int64; everything else BF16.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv4 {

// Element sizes of a serving KV layout. Defaults: bf16 window and compressed entries; fp32
// pending projections (the compressor's softmax runs in fp32).
struct ServingKvLayout {
  int window_bytes = 2;      // per element of the window ring (keys = values)
  int compressed_bytes = 2;  // per element of compressed entries and indexer keys
  int pending_bytes = 4;     // per element of the projections of not yet compressed tokens
};

struct KvFootprint {
  // Bytes that grow with every token of a sequence, summed over layers: a CSA layer adds
  // (head_dim + index_head_dim) / ratio elements, an HCA layer head_dim / ratio, a sliding layer 0.
  double bytes_per_token = 0;
  // Bytes every sequence holds whatever its length: the window ring (sliding_window x head_dim
  // per layer) and the pending projections (CSA: two windows of kv + gate at 2 x head_dim and
  // 2 x index_head_dim; HCA: one window at head_dim).
  int64_t bytes_per_sequence = 0;
};

// Per rank: the cache state is replicated (one shared KV head), so every rank holds all of it.
KvFootprint ServingKvFootprint(const core::ModelConfig& config, const ServingKvLayout& layout = {});

// Bytes of checkpoint tensors that rank `shard.rank` holds (rank 0 holds the most). Errors as
// PlanShard: InvalidArgument naming the config key the world size does not divide.
Result<int64_t> WeightBytesPerRank(const core::ModelConfig& config, const TpShard& shard,
                                   MoeSharding moe);
// The same tensors as the CPU reference holds them: every element as fp32, hash tables as int32.
Result<int64_t> HeldWeightBytesPerRank(const core::ModelConfig& config, const TpShard& shard,
                                       MoeSharding moe);

}  // namespace spark::engine::model::dsv4
