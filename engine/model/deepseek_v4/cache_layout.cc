#include "engine/model/deepseek_v4/cache_layout.h"

#include <algorithm>

namespace spark::engine::model::dsv4 {

CacheLayout::CacheLayout(const core::ModelConfig& c) {
  using core::AttentionType;
  const int d = c.head_dim, di = c.dsv4.index_head_dim;
  std::vector<std::vector<Field*>> in_v(c.num_layers);
  layers_.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerRecord& r = layers_[i];
    const AttentionType type = c.layers[i].attention;
    std::vector<std::pair<Field*, int>> fields = {{&r.window, d}};
    if (type == AttentionType::kHeavilyCompressed) {
      fields.insert(fields.end(), {{&r.comp_kv, d}, {&r.comp_gate, d}, {&r.entry, d}});
    } else if (type == AttentionType::kCompressedSparse) {
      fields.insert(fields.end(), {{&r.comp_kv, 2 * d},
                                   {&r.comp_gate, 2 * d},
                                   {&r.entry, d},
                                   {&r.idx_kv, 2 * di},
                                   {&r.idx_gate, 2 * di},
                                   {&r.idx_key, di}});
    }
    // Largest first into the emptier half.
    std::stable_sort(fields.begin(), fields.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    int used_k = 0, used_v = 0;
    for (auto& [field, width] : fields) {
      field->width = width;
      if (used_k <= used_v) {
        field->offset = used_k;
        used_k += width;
      } else {
        field->offset = used_v;  // shifted by kv_width below
        used_v += width;
        in_v[i].push_back(field);
      }
    }
    kv_width_ = std::max({kv_width_, used_k, used_v});
  }
  for (auto& fields : in_v) {
    for (Field* f : fields) f->offset += kv_width_;
  }
}

backend::CacheField CacheLayout::Ref(PagedKvCache& cache, int layer, const Field& f) const {
  if (!f.present()) return {};
  const bool in_k = f.offset < kv_width_;
  return {in_k ? cache.k(layer) : cache.v(layer), kv_width_, in_k ? f.offset : f.offset - kv_width_,
          f.width};
}

}  // namespace spark::engine::model::dsv4
