#include "engine/model/qwen3/qwen3_config.h"

#include <algorithm>

#include "base/field_errors.h"
#include "engine/core/config_reader.h"

namespace spark::engine::model::qwen3 {
namespace {

using core::LayerSpec;
using core::MlpType;
using core::ModelConfig;
using nlohmann::json;
using Reader = core::ConfigReader;

// rope_theta sits at the top level (transformers 4.x) or in rope_parameters (5.x).
void ReadRope(const json& doc, Reader& r, ModelConfig* c) {
  r.Refuse("rope_scaling", json::object({{"rope_type", "default"}}),
           "only plain RoPE is implemented");
  if (doc.contains("rope_parameters") && doc["rope_parameters"].is_object()) {
    const json& rp = doc["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"] != "default") {
      r.Bad("rope_parameters.rope_type",
            "= " + rp["rope_type"].dump() + " is not supported (only \"default\" RoPE)");
    }
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) {
      c->rope_theta = rp["rope_theta"].get<double>();
      return;
    }
  }
  r.Double("rope_theta", &c->rope_theta);
}

void ReadLayerTypes(const json& doc, Reader& r, ModelConfig* c) {
  c->layers.assign(static_cast<size_t>(std::max(c->num_layers, 0)), LayerSpec{});
  if (!doc.contains("layer_types") || doc["layer_types"].is_null()) return;
  const json& types = doc["layer_types"];
  if (!types.is_array()) return r.Bad("layer_types", "must be a list");
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "full_attention") {
      r.Bad("layer_types[" + std::to_string(i) + "]",
            "= " + types[i].dump() + " is not supported (only \"full_attention\")");
    }
  }
}

void ReadMoe(const json& doc, Reader& r, ModelConfig* c) {
  // transformers 5 writes num_local_experts; 4.x wrote num_experts.
  r.Int(doc.contains("num_local_experts") ? "num_local_experts" : "num_experts",
        &c->moe.num_experts);
  r.Int("num_experts_per_tok", &c->moe.top_k);
  r.Int("moe_intermediate_size", &c->moe.intermediate_size);
  r.Bool("norm_topk_prob", &c->moe.norm_topk_prob);
  int sparse_step = 1;
  r.Int("decoder_sparse_step", &sparse_step, false);
  std::vector<int> mlp_only;
  r.IntList("mlp_only_layers", &mlp_only);
  if (sparse_step < 1) r.Bad("decoder_sparse_step", "must be >= 1");
  for (int i = 0; i < static_cast<int>(c->layers.size()); ++i) {
    const bool dense = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    const bool sparse = c->moe.num_experts > 0 && sparse_step > 0 && (i + 1) % sparse_step == 0;
    c->layers[i].mlp = (!dense && sparse) ? MlpType::kMoe : MlpType::kDense;
  }
}

}  // namespace

Result<ModelConfig> ParseQwen3Config(const json& doc, const std::string& path) {
  ModelConfig c;
  c.model_type = doc["model_type"].get<std::string>();
  FieldErrors errors;
  Reader r(doc, &errors);
  r.Int("vocab_size", &c.vocab_size);
  r.Int("hidden_size", &c.hidden_size);
  r.Int("intermediate_size", &c.intermediate_size, c.model_type == "qwen3");
  r.Int("num_hidden_layers", &c.num_layers);
  r.Int("num_attention_heads", &c.num_heads);
  c.num_kv_heads = c.num_heads;
  r.Int("num_key_value_heads", &c.num_kv_heads, false);
  c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  r.Int("head_dim", &c.head_dim, false);
  r.Float("rms_norm_eps", &c.rms_norm_eps);
  r.Int("max_position_embeddings", &c.max_position_embeddings, false);
  r.Bool("tie_word_embeddings", &c.tie_word_embeddings);
  r.IntList("eos_token_id", &c.eos_token_ids);
  ReadRope(doc, r, &c);
  r.Refuse("hidden_act", "silu", "only SiLU MLPs are implemented");
  r.Refuse("attention_bias", false, "q/k/v/o biases are not implemented");
  r.Refuse("use_sliding_window", false, "sliding-window attention is not implemented");
  ReadLayerTypes(doc, r, &c);
  if (c.model_type == "qwen3_moe") ReadMoe(doc, r, &c);
  SPARK_RETURN_IF_ERROR(errors.ToStatus(path));
  SPARK_RETURN_IF_ERROR(c.Validate(path));
  return c;
}


}  // namespace spark::engine::model::qwen3
