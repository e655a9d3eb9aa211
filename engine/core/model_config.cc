#include "engine/core/model_config.h"

#include <algorithm>

#include "base/field_errors.h"

namespace spark::engine::core {

Status ModelConfig::Validate(const std::string& path) const {
  FieldErrors e;
  auto positive = [&](const char* key, int v) {
    if (v <= 0) e.Add(key, "must be > 0, got " + std::to_string(v));
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_layers);
  positive("num_attention_heads", num_heads);
  positive("num_key_value_heads", num_kv_heads);
  positive("head_dim", head_dim);
  if (head_dim % 2 != 0) e.Add("head_dim", "must be even for RoPE");
  if (num_kv_heads > 0 && num_heads % num_kv_heads != 0) {
    e.Add("num_key_value_heads",
          "must divide num_attention_heads (" + std::to_string(num_heads) + ")");
  }
  if (rms_norm_eps <= 0) e.Add("rms_norm_eps", "must be > 0");
  if (rope_theta <= 0) e.Add("rope_theta", "must be > 0");
  bool any_dense = false, any_moe = false;
  for (const LayerSpec& l : layers) (l.mlp == MlpType::kDense ? any_dense : any_moe) = true;
  if (any_dense) positive("intermediate_size", intermediate_size);
  if (any_moe) {
    positive("num_experts", moe.num_experts);
    positive("moe_intermediate_size", moe.intermediate_size);
    if (moe.top_k <= 0 || moe.top_k > moe.num_experts) {
      e.Add("num_experts_per_tok", "must be in [1, num_experts]");
    }
  }
  return e.ToStatus(path);
}

namespace {

int LatestAtOrBefore(const std::vector<int>& ids, int layer) {
  int found = -1;
  for (int id : ids) {
    if (id <= layer) found = std::max(found, id);
  }
  return found;
}

bool Contains(const std::vector<int>& ids, int layer) {
  return std::find(ids.begin(), ids.end(), layer) != ids.end();
}

}  // namespace

int DeepseekV41Settings::KvSourceOf(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(compress_ratios.size())) return -1;
  return compress_ratios[layer] == 0 ? -1 : LatestAtOrBefore(kv_source_layer_ids, layer);
}

int DeepseekV41Settings::IndexSourceOf(int layer) const {
  if (KvSourceOf(layer) < 0) return -1;
  return LatestAtOrBefore(index_source_layer_ids, layer);
}

bool DeepseekV41Settings::IsKvSource(int layer) const {
  return Contains(kv_source_layer_ids, layer);
}

bool DeepseekV41Settings::IsIndexSource(int layer) const {
  return Contains(index_source_layer_ids, layer);
}

int DeepseekV41Settings::EngramIndex(int layer) const {
  for (size_t i = 0; i < engram_layer_ids.size(); ++i) {
    if (engram_layer_ids[i] == layer) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace spark::engine::core
