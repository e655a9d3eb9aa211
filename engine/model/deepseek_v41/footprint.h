// Memory a DeepSeek-V4.1 model needs on one rank when served, from config.json and the
// tensor-parallel plan (dsv4::PlanShard), for capacity planning (docs/models.md, profiles):
//   - weights in the released storage types: wq_a, wq_b, wkv, wo_a, wo_b, the indexer's wq_b,
//     Engram's wkv and the shared expert FP8 E4M3 with a UE8M0 byte per 32x32 block; routed
//     experts e2m1 (half a byte) with an E8M0 byte per 32 inputs; mHC, sinks and router biases
//     fp32; everything else BF16. The Engram tables (F8_E4M3 rows, an E8M0 byte per 32) are
//     counted apart: they are read by row from the mapped checkpoint, not held.
//   - the KV cache of the serving layout, replicated on every rank: per token, each KV source's
//     FP4 entry (head_dim / 2 bytes + an E4M3 scale per 16) and FP4 indexer key (index_head_dim
//     / 2 + a UE8M0 scale per 32), divided by its ratio; per running sequence, every layer's
//     FP8 window ring (sliding_window x (head_dim + a scale per 32)), the fp32 kv and gate
//     projections of the ratio - 1 pending tokens of each pooling source, and Engram's look-back
//     (max_ngram_size - 1 int32 ids).
// The CPU reference keeps fp32 copies and the per-token record of cache_layout.h instead.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv41 {

struct ServingFootprint {
  int64_t weight_bytes = 0;        // this rank's tensors, Engram tables excluded
  int64_t engram_table_bytes = 0;  // all Engram tables with their scales (every rank maps them)
  int64_t kv_bytes_per_token = 0;  // all layers
  int64_t kv_bytes_per_sequence = 0;
};

// InvalidArgument naming the config key the world size does not divide (PlanShard).
Result<ServingFootprint> ServingMemory(const core::ModelConfig& config, const TpShard& shard,
                                       MoeSharding moe);

}  // namespace spark::engine::model::dsv41
