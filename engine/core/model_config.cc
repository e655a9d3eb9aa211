#include "engine/core/model_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/field_errors.h"

namespace spark::engine::core {
namespace {

using nlohmann::json;

// Typed reads of config.json keys that record problems instead of throwing.
class Reader {
 public:
  Reader(const json& doc, FieldErrors* errors) : doc_(doc), errors_(errors) {}

  void Int(const char* key, int* out, bool required = true) {
    if (!Present(key, required)) return;
    if (!doc_[key].is_number_integer()) return Bad(key, "must be an integer");
    *out = doc_[key].get<int>();
  }
  void Float(const char* key, float* out, bool required = true) {
    if (!Present(key, required)) return;
    if (!doc_[key].is_number()) return Bad(key, "must be a number");
    *out = doc_[key].get<float>();
  }
  void Double(const char* key, double* out, bool required = true) {
    if (!Present(key, required)) return;
    if (!doc_[key].is_number()) return Bad(key, "must be a number");
    *out = doc_[key].get<double>();
  }
  void Bool(const char* key, bool* out) {
    if (!Present(key, false)) return;
    if (!doc_[key].is_boolean()) return Bad(key, "must be true or false");
    *out = doc_[key].get<bool>();
  }
  void IntList(const char* key, std::vector<int>* out) {
    if (!Present(key, false)) return;
    const json& v = doc_[key];
    if (v.is_number_integer()) return out->push_back(v.get<int>());
    if (!v.is_array()) return Bad(key, "must be an integer or a list of integers");
    for (const json& e : v) {
      if (!e.is_number_integer()) return Bad(key, "must hold only integers");
      out->push_back(e.get<int>());
    }
  }
  // The key may be absent or null, or hold exactly `allowed`; anything else is unsupported.
  void Refuse(const char* key, const json& allowed, const std::string& why) {
    if (!doc_.contains(key) || doc_[key].is_null() || doc_[key] == allowed) return;
    Bad(key, "= " + doc_[key].dump() + " is not supported (" + why + ")");
  }
  void Bad(const std::string& key, const std::string& message) { errors_->Add(key, message); }

 private:
  bool Present(const char* key, bool required) {
    if (doc_.contains(key) && !doc_[key].is_null()) return true;
    if (required) errors_->Add(key, "missing (a Hugging Face config.json always has it)");
    return false;
  }
  const json& doc_;
  FieldErrors* errors_;
};

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
  for (const LayerSpec& l : layers) (l.mlp == MlpType::kMoe ? any_moe : any_dense) = true;
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

Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& ex) {
    return InvalidArgumentError(path + ": not valid JSON (" + ex.what() + ")");
  }
  if (!doc.is_object()) return InvalidArgumentError(path + ": must hold a JSON object");
  if (!doc.contains("model_type") || !doc["model_type"].is_string()) {
    return InvalidArgumentError(path +
                                ": model_type: missing; expected \"qwen3\" or \"qwen3_moe\"");
  }
  ModelConfig c;
  c.model_type = doc["model_type"].get<std::string>();
  if (c.model_type != "qwen3" && c.model_type != "qwen3_moe") {
    return UnimplementedError(path + ": model_type: \"" + c.model_type +
                              "\" is not supported (supported: qwen3, qwen3_moe)");
  }
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

namespace {

// generation_config.json may list more stop tokens than config.json (Qwen3: <|im_end|> and
// <|endoftext|>); they are added to eos_token_ids. A missing or unreadable file adds nothing.
void MergeGenerationEos(const std::filesystem::path& dir, ModelConfig* c) {
  std::ifstream in(dir / "generation_config.json");
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  FieldErrors ignored;
  std::vector<int> ids;
  Reader(doc, &ignored).IntList("eos_token_id", &ids);
  for (int id : ids) {
    if (std::find(c->eos_token_ids.begin(), c->eos_token_ids.end(), id) == c->eos_token_ids.end()) {
      c->eos_token_ids.push_back(id);
    }
  }
}

}  // namespace

Result<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot read; --model must name a checkpoint directory");
  std::stringstream text;
  text << in.rdbuf();
  SPARK_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(text.str(), path));
  MergeGenerationEos(dir, &config);
  return config;
}

}  // namespace spark::engine::core
