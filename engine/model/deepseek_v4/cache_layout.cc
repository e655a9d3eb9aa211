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
    const auto [k, v] = PackFields(std::move(fields), &in_v[i]);
    widths_.push_back(k);
    v_widths_.push_back(v);
    for (Field* f : in_v[i]) f->offset += k;
    kv_width_ = std::max({kv_width_, k, v});
  }
}

backend::CacheField CacheLayout::Ref(PagedKvCache& cache, int layer, const Field& f) const {
  return FieldRef(cache, layer, f, widths_[layer], v_widths_[layer]);
}

std::pair<int, int> PackFields(std::vector<std::pair<Field*, int>> fields,
                               std::vector<Field*>* in_v) {
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
      field->offset = used_v;  // the caller shifts it by the K width
      used_v += width;
      in_v->push_back(field);
    }
  }
  return {used_k, used_v};
}

KvCacheSpec LayoutSpec(const std::vector<int>& k_widths, const std::vector<int>& v_widths) {
  KvCacheSpec spec;
  spec.num_layers = static_cast<int>(k_widths.size());
  spec.kv_width = std::max(*std::max_element(k_widths.begin(), k_widths.end()),
                           *std::max_element(v_widths.begin(), v_widths.end()));
  spec.layer_widths = k_widths;
  spec.layer_v_widths = v_widths;
  return spec;
}

backend::CacheField FieldRef(PagedKvCache& cache, int layer, const Field& f, int k_width,
                             int v_width) {
  if (!f.present()) return {};
  const bool in_k = f.offset < k_width;
  return {in_k ? cache.k(layer) : cache.v(layer), in_k ? k_width : v_width,
          in_k ? f.offset : f.offset - k_width, f.width};
}

}  // namespace spark::engine::model::dsv4
