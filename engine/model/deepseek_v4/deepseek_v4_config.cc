#include "engine/model/deepseek_v4/deepseek_v4_config.h"

#include <algorithm>

#include "base/field_errors.h"
#include "engine/core/config_reader.h"

namespace spark::engine::model::dsv4 {
namespace {

using core::AttentionType;
using core::DeepseekV4Settings;
using core::LayerSpec;
using core::MlpType;
using core::ModelConfig;
using core::StringOr;
using core::YarnSettings;
using nlohmann::json;
using Reader = core::ConfigReader;

// The RoPE type of one table ("rope_type", or legacy "type"); "default" when absent. A value of
// another JSON type is an error naming `where` (the caller stops reading that table: returns "").
std::string RopeType(const json& table, const std::string& where, Reader& r) {
  for (const char* k : {"rope_type", "type"}) {
    if (!table.contains(k) || table[k].is_null()) continue;
    if (!table[k].is_string()) {
      r.Bad(where + "." + k,
            "= " + table[k].dump() + " must be a string (\"default\" or \"yarn\")");
      return "";
    }
    return table[k].get<std::string>();
  }
  return "default";
}

// Reads table[k] into `out` when it is a number; absent or null leaves `out` (an error when
// `required`); any other type is an error naming the key and the value.
void RopeNumber(const json& table, const std::string& where, const char* k, bool required,
                Reader& r, double* out) {
  if (!table.contains(k) || table[k].is_null()) {
    if (required) r.Bad(where + "." + k, "missing (YaRN needs it)");
    return;
  }
  if (!table[k].is_number()) {
    return r.Bad(where + "." + k, "= " + table[k].dump() + " must be a number");
  }
  *out = table[k].get<double>();
}

// A nested RoPE table (`main`, `compress`): an object, absent/null, or an error naming it.
bool RopeTable(const json& parent, const std::string& where, const char* k, Reader& r) {
  if (!parent.contains(k) || parent[k].is_null()) return false;
  if (parent[k].is_object()) return true;
  r.Bad(where + "." + k, "= " + parent[k].dump() + " must be an object");
  return false;
}

// rope_parameters as transformers 5 saves it ({"main": {...}, "compress": {...}}), or flat (one
// dict, or legacy rope_scaling) holding the YaRN keys of the compress table. Every wrongly-typed
// field is an error naming its key; none falls back to a default.
}  // namespace

void ReadDeepseekRope(const json& doc, Reader& r, ModelConfig* c) {
  DeepseekV4Settings& d = c->dsv4;
  r.Double("rope_theta", &c->rope_theta, false);
  r.Double("compress_rope_theta", &d.compress_rope_theta, false);
  json rp = json::object();
  std::string key = "rope_parameters";
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    if (!doc.contains(k) || doc[k].is_null()) continue;
    if (!doc[k].is_object()) return r.Bad(k, "= " + doc[k].dump() + " must be an object");
  }
  if (doc.contains("rope_parameters") && doc["rope_parameters"].is_object()) {
    rp = doc["rope_parameters"];
  } else if (doc.contains("rope_scaling") && doc["rope_scaling"].is_object()) {
    rp = doc["rope_scaling"];
    key = "rope_scaling";
  }
  json compress = rp;
  std::string ckey = key;
  if (RopeTable(rp, key, "main", r)) {
    const json& main = rp["main"];
    const std::string type = RopeType(main, key + ".main", r);
    if (!type.empty() && type != "default") {
      r.Bad(key + ".main.rope_type", "= \"" + type + "\" is not supported (only \"default\")");
    }
    RopeNumber(main, key + ".main", "rope_theta", false, r, &c->rope_theta);
    ckey = key + ".compress";
    compress = RopeTable(rp, key, "compress", r) ? rp["compress"] : json::object();
    RopeNumber(compress, ckey, "rope_theta", false, r, &d.compress_rope_theta);
  } else if (rp.contains("main")) {
    return;  // RopeTable named the wrongly-typed `main`
  }
  const std::string type = RopeType(compress, ckey, r);
  if (type.empty() || type == "default") return;
  if (type != "yarn") {
    return r.Bad(ckey + ".rope_type",
                 "= \"" + type + "\" is not supported (only \"yarn\" or \"default\")");
  }
  YarnSettings& y = d.compress_yarn;
  y.enabled = true;
  RopeNumber(compress, ckey, "factor", true, r, &y.factor);
  double original = 0;
  RopeNumber(compress, ckey, "original_max_position_embeddings", true, r, &original);
  y.original_max_position_embeddings = static_cast<int>(original);
  RopeNumber(compress, ckey, "beta_fast", false, r, &y.beta_fast);
  RopeNumber(compress, ckey, "beta_slow", false, r, &y.beta_slow);
  RopeNumber(compress, ckey, "attention_factor", false, r, &y.attention_factor);  // V4: 1.0
  if (compress.contains("truncate") && !compress["truncate"].is_null()) {
    if (!compress["truncate"].is_boolean()) {
      r.Bad(ckey + ".truncate", "= " + compress["truncate"].dump() + " must be true or false");
    } else if (!compress["truncate"].get<bool>()) {
      r.Bad(ckey + ".truncate", "= false is not supported (transformers' V4 always truncates)");
    }
  }
  if (y.factor <= 0) r.Bad(ckey + ".factor", "must be > 0");
  if (y.original_max_position_embeddings <= 0) {
    r.Bad(ckey + ".original_max_position_embeddings", "must be > 0");
  }
}

namespace {

// layer_types (or legacy compress_ratios) and mlp_layer_types (or legacy num_hash_layers).
void ReadDeepseekV4Layers(const json& doc, Reader& r, ModelConfig* c) {
  DeepseekV4Settings& d = c->dsv4;
  const int n = std::max(c->num_layers, 0);
  c->layers.assign(static_cast<size_t>(n), LayerSpec{});
  if (doc.contains("compress_rates") && doc["compress_rates"].is_object()) {
    const json& rates = doc["compress_rates"];
    for (auto [name, out] : {std::pair{"compressed_sparse_attention", &d.compress_rate_csa},
                             {"heavily_compressed_attention", &d.compress_rate_hca}}) {
      if (!rates.contains(name)) continue;
      if (!rates[name].is_number_integer()) {
        r.Bad(std::string("compress_rates.") + name, "must be an integer");
      } else {
        *out = rates[name].get<int>();
      }
    }
  }
  r.Int("compress_rate_csa", &d.compress_rate_csa, false);
  r.Int("compress_rate_hca", &d.compress_rate_hca, false);
  std::vector<AttentionType> attention;
  if (doc.contains("layer_types") && doc["layer_types"].is_array()) {
    for (const json& t : doc["layer_types"]) {
      if (t == "sliding_attention") {
        attention.push_back(AttentionType::kSliding);
      } else if (t == "compressed_sparse_attention") {
        attention.push_back(AttentionType::kCompressedSparse);
      } else if (t == "heavily_compressed_attention") {
        attention.push_back(AttentionType::kHeavilyCompressed);
      } else {
        r.Bad("layer_types", "entry " + t.dump() +
                                 " is not one of sliding_attention, compressed_sparse_attention, "
                                 "heavily_compressed_attention");
      }
    }
  } else if (doc.contains("compress_ratios") && doc["compress_ratios"].is_array()) {
    for (const json& v : doc["compress_ratios"]) {
      const int ratio = v.is_number_integer() ? v.get<int>() : -1;
      if (ratio == 0) {
        attention.push_back(AttentionType::kSliding);
      } else if (ratio == 4) {
        attention.push_back(AttentionType::kCompressedSparse);
      } else if (ratio == 128) {
        attention.push_back(AttentionType::kHeavilyCompressed);
      } else {
        r.Bad("compress_ratios", "entry " + v.dump() + " is not 0, 4 or 128");
      }
    }
  } else {
    r.Bad("layer_types", "missing (or compress_ratios); the layer schedule has no default here");
  }
  if (!attention.empty() && static_cast<int>(attention.size()) < n) {
    r.Bad("layer_types", "has " + std::to_string(attention.size()) + " entries, fewer than " +
                             "num_hidden_layers (" + std::to_string(n) + ")");
  }
  int hash_layers = 3;
  r.Int("num_hash_layers", &hash_layers, false);
  std::vector<MlpType> mlp;
  if (doc.contains("mlp_layer_types") && doc["mlp_layer_types"].is_array()) {
    for (const json& t : doc["mlp_layer_types"]) {
      if (t == "moe" || t == "hash_moe") {
        mlp.push_back(t == "moe" ? MlpType::kMoe : MlpType::kHashMoe);
      } else {
        r.Bad("mlp_layer_types", "entry " + t.dump() + " is not \"moe\" or \"hash_moe\"");
      }
    }
    if (static_cast<int>(mlp.size()) < n) {
      r.Bad("mlp_layer_types", "has fewer entries than num_hidden_layers");
    }
  }
  for (int i = 0; i < n; ++i) {
    if (i < static_cast<int>(attention.size())) c->layers[i].attention = attention[i];
    c->layers[i].mlp = i < static_cast<int>(mlp.size()) ? mlp[i]
                       : i < hash_layers                ? MlpType::kHashMoe
                                                        : MlpType::kMoe;
  }
}

Status ValidateDeepseekV4(const ModelConfig& c, const std::string& path) {
  FieldErrors e;
  const DeepseekV4Settings& d = c.dsv4;
  auto positive = [&](const char* key, int v) {
    if (v <= 0) e.Add(key, "must be > 0, got " + std::to_string(v));
  };
  positive("q_lora_rank", d.q_lora_rank);
  positive("o_groups", d.o_groups);
  positive("o_lora_rank", d.o_lora_rank);
  positive("sliding_window", d.sliding_window);
  positive("hc_mult", c.residual_streams);
  positive("hc_sinkhorn_iters", d.hc_sinkhorn_iters);
  positive("compress_rates.compressed_sparse_attention", d.compress_rate_csa);
  positive("compress_rates.heavily_compressed_attention", d.compress_rate_hca);
  if (d.rope_head_dim <= 0 || d.rope_head_dim % 2 != 0 || d.rope_head_dim > c.head_dim) {
    e.Add("partial_rotary_factor", "gives " + std::to_string(d.rope_head_dim) +
                                       " RoPE channels; need an even count in [2, head_dim]");
  }
  if (d.o_groups > 0 && c.num_heads % d.o_groups != 0) {
    e.Add("o_groups", "must divide num_attention_heads (" + std::to_string(c.num_heads) + ")");
  }
  bool csa = false;
  for (const LayerSpec& l : c.layers) csa |= l.attention == AttentionType::kCompressedSparse;
  if (csa) {
    positive("index_n_heads", d.index_n_heads);
    positive("index_head_dim", d.index_head_dim);
    positive("index_topk", d.index_topk);
    if (d.index_head_dim % 2 != 0 || d.index_head_dim < d.rope_head_dim) {
      e.Add("index_head_dim",
            "must be even and >= the RoPE channels (" + std::to_string(d.rope_head_dim) + ")");
    }
  }
  if (d.swiglu_limit < 0) e.Add("swiglu_limit", "must be >= 0");
  SPARK_RETURN_IF_ERROR(e.ToStatus(path));
  return c.Validate(path);
}

}  // namespace

Result<ModelConfig> ParseDeepseekV4Config(const json& doc, const std::string& path) {
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.qk_norm = false;
  c.rope_theta = 10000.0;
  c.num_kv_heads = 1;
  c.tie_word_embeddings = false;
  c.residual_streams = 4;
  c.moe.norm_topk_prob = true;  // V4 always renormalises the selected weights
  c.moe.num_shared_experts = 1;
  DeepseekV4Settings& d = c.dsv4;
  d.swiglu_limit = 10.0f;
  d.routed_scaling_factor = 1.5f;
  FieldErrors errors;
  Reader r(doc, &errors);
  r.Int("vocab_size", &c.vocab_size);
  r.Int("hidden_size", &c.hidden_size);
  r.Int("num_hidden_layers", &c.num_layers);
  r.Int("num_attention_heads", &c.num_heads);
  r.Int("num_key_value_heads", &c.num_kv_heads, false);
  r.Int("head_dim", &c.head_dim);
  r.Float("rms_norm_eps", &c.rms_norm_eps);
  r.Int("max_position_embeddings", &c.max_position_embeddings, false);
  r.Bool("tie_word_embeddings", &c.tie_word_embeddings);
  r.IntList("eos_token_id", &c.eos_token_ids);
  r.Int("hc_mult", &c.residual_streams, false);
  r.Int("n_routed_experts", &c.moe.num_experts);
  r.Int("num_experts_per_tok", &c.moe.top_k);
  r.Int("moe_intermediate_size", &c.moe.intermediate_size);
  r.Int("n_shared_experts", &c.moe.num_shared_experts, false);
  c.moe.shared_intermediate_size = c.moe.intermediate_size;
  c.intermediate_size = c.moe.intermediate_size;  // transformers maps intermediate_size here
  r.Int("q_lora_rank", &d.q_lora_rank);
  r.Int("o_groups", &d.o_groups);
  r.Int("o_lora_rank", &d.o_lora_rank);
  r.Int("sliding_window", &d.sliding_window);
  r.Int("hc_sinkhorn_iters", &d.hc_sinkhorn_iters, false);
  r.Float("hc_eps", &d.hc_eps, false);
  r.Int("index_n_heads", &d.index_n_heads, false);
  r.Int("index_head_dim", &d.index_head_dim, false);
  r.Int("index_topk", &d.index_topk, false);
  r.Float("swiglu_limit", &d.swiglu_limit, false);
  r.Float("routed_scaling_factor", &d.routed_scaling_factor, false);
  double partial = 64.0 / 512.0;
  r.Double("partial_rotary_factor", &partial, false);
  d.rope_head_dim = static_cast<int>(c.head_dim * partial);
  if (!doc.contains("partial_rotary_factor") || doc["partial_rotary_factor"].is_null()) {
    r.Int("qk_rope_head_dim", &d.rope_head_dim, false);
  }
  ReadDeepseekRope(doc, r, &c);
  ReadDeepseekV4Layers(doc, r, &c);
  r.Refuse("scoring_func", "sqrtsoftplus", "only the sqrtsoftplus router is implemented");
  r.Refuse("hidden_act", "silu", "only SiLU experts are implemented");
  r.Refuse("attention_bias", false, "attention biases are not implemented");
  r.Refuse("mlp_bias", false, "MLP biases are not implemented");
  if (c.num_kv_heads != 1) {
    r.Bad("num_key_value_heads", "= " + std::to_string(c.num_kv_heads) +
                                     " is not supported (V4 has one shared KV head; set 1)");
  }
  if (c.moe.num_shared_experts != 1) {
    r.Bad("n_shared_experts", "= " + std::to_string(c.moe.num_shared_experts) +
                                  " is not supported (V4 has one shared expert; set 1)");
  }
  if (doc.contains("quantization_config") && doc["quantization_config"].is_object()) {
    const std::string method = StringOr(doc["quantization_config"], "quant_method", "");
    if (method != "fp8") {
      r.Bad("quantization_config.quant_method",
            "= \"" + method + "\" is not supported (only the released \"fp8\" layout)");
    }
  }
  SPARK_RETURN_IF_ERROR(errors.ToStatus(path));
  SPARK_RETURN_IF_ERROR(ValidateDeepseekV4(c, path));
  return c;
}

}  // namespace spark::engine::model::dsv4
