// DeepSeek-V4 attention of one layer over a batch, reading and writing the per-token state in
// the paged KV cache (cache_layout.h).
//
// q: wq_a -> q_norm -> wq_b -> per-head unweighted RMSNorm -> RoPE. One shared KV head
// (K = V): wkv -> kv_norm -> RoPE. A query at position p sees the window positions
// (p - W, p], then compressed entries: HCA (every entry w < (p + 1) / ratio) or CSA (the
// lightning indexer's top-k among those), plus a per-head sink logit. The output's rope
// channels are rotated back, then the grouped low-rank projection wo_a (per group) -> wo_b.
// Compressed entries are produced when a token closes a window: per-channel softmax pooling
// over the window (for CSA over the previous window's first series and this window's second
// series), RMSNorm, RoPE at the window's first position. The lightning indexer pools its own keys
// the same way at index_head_dim.
// Under tensor parallelism the rank computes its heads and output groups only (weights.h), and
// `out` is its partial sum of wo_b, to be all-reduced; the cache state is replicated.
// Thread-safety: one call at a time per object; the object is read-only.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/deepseek_v4/rope.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv4 {

class Attention {
 public:
  Attention(const core::ModelConfig& config, const Weights& weights, const CacheLayout& layout,
            backend::Backend& backend);

  // out [tokens, hidden] = attention of `layer` for input a [tokens, hidden] (attn_norm
  // applied). Writes the tokens' state into `cache` first. The batch must be validated.
  void Forward(int layer, const float* a, const ForwardBatch& batch, PagedKvCache& cache,
               float* out) const;

  const RopeTable& main_rope() const { return main_; }
  const RopeTable& compress_rope() const { return compress_; }

 private:
  struct Step;

  void Linear(const float* x, int64_t rows, int in, const Vec& w, int out_features,
              float* out) const;
  std::vector<float> Queries(Step& s) const;
  void StoreWindow(const Step& s) const;
  void StoreCompressed(Step& s, const std::vector<float>& qr) const;
  void OutputProjection(const Step& s, const std::vector<float>& o, float* out) const;
  void StoreProjections(const Step& s, const CompressorWeights& w, const Field& kv_field,
                        const Field& gate_field, int width) const;
  std::vector<float> Compress(const Step& s, int64_t token, const Field& kv_field,
                              const Field& gate_field, int dim, bool overlap, const Vec& norm,
                              int64_t window) const;
  std::vector<int64_t> CompressedEntries(const Step& s, int64_t token) const;
  void AttendOne(const Step& s, int64_t token, float* out) const;

  const core::ModelConfig& c_;
  const Weights& w_;
  const CacheLayout& layout_;
  backend::Backend& backend_;
  RopeTable main_, compress_;
};

}  // namespace spark::engine::model::dsv4
