#include "engine/model/deepseek_v41/cache_layout.h"

#include <algorithm>
#include <utility>

namespace spark::engine::model::dsv41 {

CacheLayout::CacheLayout(const core::ModelConfig& c, int draft_layers) {
  const core::DeepseekV41Settings& s = c.dsv41;
  const int d = c.head_dim, di = c.dsv4.index_head_dim;
  const int total = c.num_layers + draft_layers;
  std::vector<std::vector<Field*>> in_v(total);
  layers_.resize(total);
  for (int i = 0; i < total; ++i) {
    LayerRecord& r = layers_[i];
    std::vector<std::pair<Field*, int>> fields = {{&r.window, d}};
    if (i < c.num_layers) {
      if (s.IsKvSource(i)) {
        if (s.compress_ratios[i] > 1) {
          fields.emplace_back(&r.comp_kv, d);
          fields.emplace_back(&r.comp_gate, d);
        }
        fields.emplace_back(&r.entry, d);
        fields.emplace_back(&r.index_key, di);
      }
      if (i == 0 && !s.engram_layer_ids.empty()) fields.emplace_back(&r.token, 1);
    }  // else a DSpark draft layer: its window keys only
    const auto [k, v] = dsv4::PackFields(std::move(fields), &in_v[i]);
    widths_.push_back(k);
    v_widths_.push_back(v);
    for (Field* f : in_v[i]) f->offset += k;
    kv_width_ = std::max({kv_width_, k, v});
  }
}

}  // namespace spark::engine::model::dsv41
