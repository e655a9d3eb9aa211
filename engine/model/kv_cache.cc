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
  PagedKvCache cache;
  cache.spec_ = spec;
  cache.num_blocks_ = num_blocks;
  cache.block_size_ = block_size;
  const size_t per_layer = static_cast<size_t>(num_blocks) * block_size * spec.kv_width;
  for (int l = 0; l < spec.num_layers; ++l) {
    SPARK_ASSIGN_OR_RETURN(backend::Buffer k, backend.AllocateWeights(per_layer, spec.dtype));
    SPARK_ASSIGN_OR_RETURN(backend::Buffer v, backend.AllocateWeights(per_layer, spec.dtype));
    cache.k_.push_back(std::move(k));
    cache.v_.push_back(std::move(v));
  }
  return cache;
}

}  // namespace spark::engine::model
