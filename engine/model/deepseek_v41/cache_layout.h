// Where DeepSeek-V4.1's decode state lives in the paged KV cache: every piece is stored per
// token at the token's KV slot, so the state of a sequence is a pure function of its cached
// tokens — chunked prefill may split anywhere (on or off every ratio grid), decode needs nothing
// beyond the block table, and a cached prefix restores the shared compressed KV, the indexer keys
// and the Engram look-back exactly. Per token and layer (D = head_dim, dI = index_head_dim):
//   window     [D]   every layer: kv_norm(wkv a), roped, FP8 fake-quantised — the window keys
//   comp_kv    [D]   KV sources with ratio > 1: the compressor's kv and gate projections of the
//   comp_gate  [D]   token (the pending tokens of its group until the group closes)
//   entry      [D]   KV sources: the shared compressed entry of the group this token closes
//                    (every token at ratio 1), roped and FP4 fake-quantised
//   index_key  [dI]  KV sources: the indexer key of that entry, FP4 fake-quantised
//   token      [1]   layer 0 when the model has Engram: the token's compressed id (the n-gram
//                    history; exact as a float below 2^24)
// and, with DSpark drafting, a window [D] per draft layer after the backbone's layers.
// Layers that reuse a source's compressed KV or top-k keep only their window. The candidate
// blocks and top-k selections are recomputed each step from these (they depend only on the
// cached keys and the step's queries). The fields of a layer are spread over the cache's K and
// V halves (dsv4::PackFields), each layer's record as wide as its own fields (a layer that
// keeps only its window holds nothing more). This is the fp32 reference layout: the window is
// kept for every token, not only the last sliding_window.
// Thread-safety: read-only after construction.
#pragma once

#include <vector>

#include "engine/backend/deepseek_op_args.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv41 {

using dsv4::Field;

struct LayerRecord {
  Field window, comp_kv, comp_gate, entry, index_key, token;
};

class CacheLayout {
 public:
  // With `draft_layers`, records num_layers .. num_layers + draft_layers - 1 hold the DSpark
  // draft layers' window keys (dspark.h): the context keys the target's forward writes and the
  // draft block's own.
  explicit CacheLayout(const core::ModelConfig& config, int draft_layers = 0);
  int num_layers() const { return static_cast<int>(layers_.size()); }

  // Floats per token in the widest half of any layer's record, and in each layer's K and V.
  int kv_width() const { return kv_width_; }
  const std::vector<int>& widths() const { return widths_; }
  const std::vector<int>& v_widths() const { return v_widths_; }
  KvCacheSpec spec() const { return dsv4::LayoutSpec(widths_, v_widths_); }
  const LayerRecord& layer(int i) const { return layers_[i]; }
  backend::CacheField Ref(PagedKvCache& cache, int layer, const Field& f) const {
    return dsv4::FieldRef(cache, layer, f, widths_[layer], v_widths_[layer]);
  }

 private:
  int kv_width_ = 0;
  std::vector<int> widths_, v_widths_;
  std::vector<LayerRecord> layers_;
};

}  // namespace spark::engine::model::dsv41
