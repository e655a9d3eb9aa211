// PagedKvCache: the K and V memory of every layer on this rank, cut into blocks of block_size
// tokens. Layout per layer: [num_blocks, block_size, kv_width] with kv_width = this rank's KV
// heads x head_dim, so slot s (= block * block_size + offset) starts at s * kv_width. Which
// blocks a sequence owns is the runtime block manager's business (it fills block tables).
// Elements are fp32 or bf16 (KvCacheSpec::dtype; bf16 halves the bytes and what attention reads;
// fp8 weights pair with a bf16 cache, there is no fp8 cache).
// Thread-safety: none; owned by the rank's engine thread.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace spark::engine::model {

struct KvCacheSpec {
  int num_layers = 0;
  // Elements per token for K (and again for V) on this rank: of every layer, or with
  // layer_widths of the widest.
  int kv_width = 0;
  backend::DType dtype = backend::DType::kF32;
  // Per layer, when the layers' records differ in width (DeepSeek's): K's elements per token,
  // and V's (0: the layer keeps nothing in V). Empty: every layer kv_width for both.
  std::vector<int> layer_widths, layer_v_widths;

  int width(int layer) const { return layer_widths.empty() ? kv_width : layer_widths[layer]; }
  int v_width(int layer) const {
    return layer_v_widths.empty() ? width(layer) : layer_v_widths[layer];
  }
  // Bytes one token occupies across all layers (K and V) — for memory budgets.
  int64_t bytes_per_token() const {
    int64_t elements = 0;
    for (int l = 0; l < num_layers; ++l) elements += width(l) + v_width(l);
    return elements * static_cast<int64_t>(backend::DTypeBytes(dtype));
  }
};

class PagedKvCache {
 public:
  // ResourceExhausted when the backend cannot hold it; InvalidArgument for non-positive sizes.
  static Result<PagedKvCache> Create(backend::Backend& backend, const KvCacheSpec& spec,
                                     int64_t num_blocks, int block_size);

  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  const KvCacheSpec& spec() const { return spec_; }
  // One layer's K and V with their element type.
  backend::KvCacheRef layer(int layer) { return {k_[layer].raw(), v_[layer].raw(), spec_.dtype}; }
  // The fp32 elements of an fp32 cache (models that address the cache themselves).
  float* k(int layer) { return k_[layer].data(); }
  float* v(int layer) { return v_[layer].data(); }

 private:
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  int block_size_ = 0;
  std::vector<backend::Buffer> k_, v_;
};

}  // namespace spark::engine::model
