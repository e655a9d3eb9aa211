// Where DeepSeek-V4's per-layer attention state lives in the paged KV cache.
//
// Every piece of decode state is stored per token, at the token's KV slot, so the state of a
// sequence is a pure function of its cached tokens: chunked prefill may split anywhere, decode
// needs nothing beyond the block table, and a cached prefix restores the compressor and indexer
// state exactly. Per token and layer:
//   window     [D]      kv_norm(wkv a), roped — the sliding-window keys (= values)
//   comp_kv    [cw]     compressor kv projection (cw = 2D for CSA, D for HCA)
//   comp_gate  [cw]     compressor gate projection plus ape[position % ratio]
//   entry      [D]      the compressed entry of the window this token closes (written only at
//                       positions p with (p + 1) % ratio == 0)
//   idx_kv, idx_gate [2 dI], idx_key [dI]   the same for the lightning indexer (CSA layers)
// The fields of a layer are spread over the cache's K and V arrays to keep the two halves
// balanced, and each layer's record is as wide as its own fields (a window-only layer holds
// its window keys and nothing else; KvCacheSpec::layer_widths). This is the fp32 reference
// layout; it trades memory (every token keeps its projections) for simplicity.
// Thread-safety: read-only after construction.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/backend/deepseek_op_args.h"
#include "engine/core/model_config.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv4 {

struct Field {
  int offset = -1;  // in [0, 2 * kv_width): below kv_width in K, else in V
  int width = 0;
  bool present() const { return offset >= 0; }
};

struct LayerRecord {
  Field window, comp_kv, comp_gate, entry, idx_kv, idx_gate, idx_key;
};

// The cache spec of fp32 records of these per-layer widths (floats per token of K and of V).
KvCacheSpec LayoutSpec(const std::vector<int>& k_widths, const std::vector<int>& v_widths);

class CacheLayout {
 public:
  explicit CacheLayout(const core::ModelConfig& config);

  // Floats per token in the widest half of any layer's record, and in each layer's K and V.
  int kv_width() const { return kv_width_; }
  const std::vector<int>& widths() const { return widths_; }
  const std::vector<int>& v_widths() const { return v_widths_; }
  KvCacheSpec spec() const { return LayoutSpec(widths_, v_widths_); }
  const LayerRecord& layer(int i) const { return layers_[i]; }

  // Where field `f` of `layer` lives, as the DeepSeek ops address it (a pointer into the cache's
  // backend memory, not read here); an absent field gives an absent ref.
  backend::CacheField Ref(PagedKvCache& cache, int layer, const Field& f) const;

 private:
  int kv_width_ = 0;
  std::vector<int> widths_, v_widths_;
  std::vector<LayerRecord> layers_;
};

// Places `fields` (field, width) of one layer over the K and V halves of a slot, largest first
// into the emptier half; appends the fields put in V to *in_v (their offsets are relative to V,
// the caller adds the final kv_width). Returns the floats per half the layer needs. V4.1's
// layout packs its fields the same way.
std::pair<int, int> PackFields(std::vector<std::pair<Field*, int>> fields,
                               std::vector<Field*>* in_v);


// Field `f` of `layer` in a cache whose slots of that layer hold `k_width` floats of K and
// `v_width` of V (offsets from k_width on are in V).
backend::CacheField FieldRef(PagedKvCache& cache, int layer, const Field& f, int k_width,
                             int v_width);

}  // namespace spark::engine::model::dsv4
