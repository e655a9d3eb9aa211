// DeepSeek-V4.1 Engram (conditional memory) over a batch: on the host, each token's compressed id
// (token map) and look-back of max_ngram_size - 1 earlier ids — from the batch itself or, for
// positions cached in earlier steps, from the cache's per-token id field (cache_layout.h), never
// crossing the sequence start — hashed into row ids (engram_hash.h). The reads of every Engram
// layer's rows from the mmapped tables start together when the step begins; each Engram layer
// then gathers its rows (only those pages are read) and uploads them; on the backend wkv turns them
// into one key per stream and a shared value, and DeepseekOps::EngramGate adds the gated value
// into each stream. Every rank gathers the same rows from its own mapping of the checkpoint, so
// the streams stay identical across ranks.
// The id field is written only here, so a host copy of it (per cache, kept as it is written)
// answers the look-back without reading device memory back; a slot this object never wrote
// (a cache filled by another model object) is read from the cache once.
// Thread-safety: one call at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/model/deepseek_v41/backend_weights.h"
#include "engine/model/deepseek_v41/cache_layout.h"
#include "engine/model/deepseek_v41/engram_hash.h"
#include "engine/model/deepseek_v41/workspace.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv41 {

class Engram {
 public:
  // `token_map` maps token ids to compressed ids (its size: the tokenizer's).
  Engram(const core::ModelConfig& config, const BackendWeights& weights,
         const EngramHashing& hashing, std::vector<int32_t> token_map, const CacheLayout& layout,
         backend::Backend& backend, backend::DeepseekOps& ops);

  // Stores the batch's compressed ids in the cache, hashes every token's look-back ids (-1
  // before the sequence start) into the rows of every Engram layer, and has the tables start
  // reading all of those rows at once (EngramTable::Prefetch), so the reads overlap the layers
  // before each Engram layer. InvalidArgument for a token id outside the token map.
  Status Prepare(const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws) const;
  // Engram layer `e` applied to ws.streams, with the rows the last Prepare hashed.
  void Apply(int e, Workspace& ws) const;

 private:
  // The compressed id at `slot` of the cache's id field: the host copy, or a read-back.
  int64_t CachedId(const backend::CacheField& field, int64_t slot) const;

  const core::ModelConfig& c_;
  const BackendWeights& w_;
  const EngramHashing& hashing_;
  std::vector<int32_t> token_map_;
  const CacheLayout& layout_;
  backend::Backend& backend_;
  backend::DeepseekOps& ops_;
  // token_map_ as floats in backend memory: the Embedding table that writes a step's ids (no
  // upload inside the step); ready_ holds its allocation error.
  backend::Buffer map_;
  Status ready_;
  // Host copy of one cache's id field (by its base address): id + 1 per slot, 0 = not written
  // through this object.
  mutable const float* mirror_of_ = nullptr;
  mutable std::vector<int32_t> mirror_;
  // The last Prepare's table rows per Engram layer ([tokens, columns] each).
  mutable std::vector<std::vector<int64_t>> rows_;
};

}  // namespace spark::engine::model::dsv41
