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
    kv_width_ = std::max(kv_width_, PackFields(std::move(fields), &in_v[i]));
  }
  for (auto& fields : in_v) {
    for (Field* f : fields) f->offset += kv_width_;
  }
}

backend::CacheField CacheLayout::Ref(PagedKvCache& cache, int layer, const Field& f) const {
  return FieldRef(cache, layer, f, kv_width_);
}

int PackFields(std::vector<std::pair<Field*, int>> fields, std::vector<Field*>* in_v) {
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
      field->offset = used_v;  // the caller shifts it by kv_width
      used_v += width;
      in_v->push_back(field);
    }
  }
  return std::max(used_k, used_v);
}

backend::CacheField FieldRef(PagedKvCache& cache, int layer, const Field& f, int kv_width) {
  if (!f.present()) return {};
  const bool in_k = f.offset < kv_width;
  return {in_k ? cache.k(layer) : cache.v(layer), kv_width, in_k ? f.offset : f.offset - kv_width,
          f.width};
}

}  // namespace spark::engine::model::dsv4
