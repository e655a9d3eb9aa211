#include "engine/model/kv_cache.h"

#include <string>

namespace spark::engine::model {

Result<PagedKvCache> PagedKvCache::Create(backend::Backend& backend, const KvCacheSpec& spec,
                                          int64_t num_blocks, int block_size) {
  if (num_blocks <= 0 || block_size <= 0 || spec.num_layers <= 0 || spec.kv_width <= 0) {
    return InvalidArgumentError("kv cache: num_blocks (" + std::to_string(num_blocks) +
                                "), block_size (" + std::to_string(block_size) +
                                ") and the model's KV width must be > 0");
  }
  for (const std::vector<int>* widths : {&spec.layer_widths, &spec.layer_v_widths}) {
    if (widths->empty()) continue;
    if (static_cast<int>(widths->size()) != spec.num_layers) {
      return InvalidArgumentError("kv cache: " + std::to_string(widths->size()) +
                                  " layer widths for " + std::to_string(spec.num_layers) +
                                  " layers");
    }
    // K needs a slot of every layer; V may hold nothing.
    const int least = widths == &spec.layer_widths ? 1 : 0;
    for (int w : *widths) {
      if (w < least || w > spec.kv_width) {
        return InvalidArgumentError("kv cache: a layer width of " + std::to_string(w) +
                                    " is outside " + std::to_string(least) + ".." +
                                    std::to_string(spec.kv_width));
      }
    }
  }
  PagedKvCache cache;
  cache.spec_ = spec;
  cache.num_blocks_ = num_blocks;
  cache.block_size_ = block_size;
  for (int l = 0; l < spec.num_layers; ++l) {
    const size_t slots = static_cast<size_t>(num_blocks) * block_size;
    SPARK_ASSIGN_OR_RETURN(backend::Buffer k,
                           backend.AllocateWeights(slots * spec.width(l), spec.dtype));
    backend::Buffer v;  // none for a layer that keeps nothing in V
    if (spec.v_width(l) > 0) {
      SPARK_ASSIGN_OR_RETURN(v, backend.AllocateWeights(slots * spec.v_width(l), spec.dtype));
    }
    cache.k_.push_back(std::move(k));
    cache.v_.push_back(std::move(v));
  }
  return cache;
}

}  // namespace spark::engine::model
