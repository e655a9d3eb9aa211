#include "engine/model/deepseek_v41/deepseek_v41_config.h"

#include <algorithm>

#include "base/field_errors.h"
#include "engine/core/config_reader.h"
#include "engine/model/deepseek_v4/deepseek_v4_config.h"

namespace spark::engine::model::dsv41 {
namespace {

using core::DeepseekV41Settings;
using core::DeepseekV4Settings;
using core::ModelConfig;
using nlohmann::json;
using Reader = core::ConfigReader;

// transformers' DeepseekV41TextConfig class defaults for the released schedule.
const std::vector<int> kDefaultKvSources = {2, 8, 14, 20};
const std::vector<int> kDefaultIndexSources = {2, 8, 14, 20, 24, 28, 32, 36};

std::vector<int> DefaultRatios(int n) {
  std::vector<int> released = {0, 0};
  released.insert(released.end(), 18, 2);
  released.insert(released.end(), 20, 1);
  if (n == static_cast<int>(released.size())) return released;
  const int slide = std::min(2, n), enc = std::max(0, (n - slide + 1) / 2);
  std::vector<int> out(slide, 0);
  out.insert(out.end(), enc, 2);
  out.insert(out.end(), std::max(0, n - slide - enc), 1);
  return out;
}

// An optional list of integers: false when absent or null (then *out is untouched).
bool OptionalInts(const json& doc, const char* key, Reader& r, std::vector<int>* out) {
  if (!doc.contains(key) || doc[key].is_null()) return false;
  std::vector<int> v;
  r.IntList(key, &v);
  *out = std::move(v);
  return true;
}

// compress_ratios (padded / trimmed over the DSpark layers) and the source lists, derived as
// the reference derives them when absent.
void ReadSchedule(const json& doc, Reader& r, int n, DeepseekV41Settings* s) {
  std::vector<int> ratios;
  if (!OptionalInts(doc, "compress_ratios", r, &ratios)) ratios = DefaultRatios(n);
  const int nextn = s->num_nextn_predict_layers, len = static_cast<int>(ratios.size());
  if (len < n) {
    r.Bad("compress_ratios", "has " + std::to_string(len) + " entries, needs at least " +
                                 "num_hidden_layers (" + std::to_string(n) + ")");
  } else if (len > n + nextn) {
    r.Bad("compress_ratios", "has " + std::to_string(len) + " entries, more than " +
                                 "num_hidden_layers + num_nextn_predict_layers (" +
                                 std::to_string(n + nextn) + ")");
  }
  // Entries of the draft layers (the released list has 40 + 3) are accepted and dropped.
  ratios.resize(std::max(0, std::min(len, n)));
  for (int v : ratios) {
    if (v < 0) r.Bad("compress_ratios", "entry " + std::to_string(v) + " must be >= 0");
  }
  s->compress_ratios = ratios;
  if (!OptionalInts(doc, "kv_source_layer_ids", r, &s->kv_source_layer_ids)) {
    const std::vector<int> def = DefaultRatios(40);
    if (std::equal(ratios.begin(), ratios.end(), def.begin(), def.begin() + std::min(n, 40)) &&
        n <= 40) {
      s->kv_source_layer_ids = kDefaultKvSources;
    } else {
      for (int i = 0; i < static_cast<int>(ratios.size()); ++i) {
        if (ratios[i] > 0 && (i == 0 || ratios[i - 1] != ratios[i])) {
          s->kv_source_layer_ids.push_back(i);
        }
      }
    }
  }
  if (!OptionalInts(doc, "index_source_layer_ids", r, &s->index_source_layer_ids)) {
    s->index_source_layer_ids =
        s->kv_source_layer_ids == kDefaultKvSources ? kDefaultIndexSources : s->kv_source_layer_ids;
  }
  std::sort(s->kv_source_layer_ids.begin(), s->kv_source_layer_ids.end());
  std::sort(s->index_source_layer_ids.begin(), s->index_source_layer_ids.end());
  s->candidate_source_layer_id =
      s->kv_source_layer_ids.empty() ? -1 : s->kv_source_layer_ids.back();
  r.Int("candidate_source_layer_id", &s->candidate_source_layer_id, false);
  if (s->candidate_source_layer_id < 0) s->candidate_source_layer_id = -1;
}

void ReadEngram(const json& doc, Reader& r, DeepseekV41Settings* s) {
  OptionalInts(doc, "engram_layer_ids", r, &s->engram_layer_ids);
  std::vector<int64_t> rows(s->engram_layer_ids.size(), 0);
  if (doc.contains("engram_num_embeddings") && doc["engram_num_embeddings"].is_array()) {
    rows.clear();
    for (const json& v : doc["engram_num_embeddings"]) {
      if (!v.is_number_integer()) {
        r.Bad("engram_num_embeddings", "must hold only integers");
        break;
      }
      rows.push_back(v.get<int64_t>());
    }
  } else if (doc.contains("engram_num_embeddings") && !doc["engram_num_embeddings"].is_null()) {
    r.Bad("engram_num_embeddings", "must be a list of integers");
  }
  s->engram_num_embeddings = rows;
  double vocab = 16000000;
  r.Double("engram_vocab_size", &vocab, false);
  s->engram_vocab_size = static_cast<int64_t>(vocab);
  s->engram_max_ngram_size = 4;
  s->engram_n_heads = 8;
  s->engram_head_dim = 256;
  s->engram_pad_id = 2;
  s->engram_compressed_vocab_size = 99092;
  r.Int("engram_max_ngram_size", &s->engram_max_ngram_size, false);
  r.Int("engram_n_heads", &s->engram_n_heads, false);
  r.Int("engram_head_dim", &s->engram_head_dim, false);
  r.Int("engram_pad_id", &s->engram_pad_id, false);
  r.Int("engram_compressed_vocab_size", &s->engram_compressed_vocab_size, false);
}

// Schedule rules of the reference plus the ones this engine relies on (a compressed layer shares
// its KV source's ratio and the index source whose top-k it reuses reads the same keys).
void CheckSchedule(const ModelConfig& c, FieldErrors& e) {
  const DeepseekV41Settings& s = c.dsv41;
  const int n = static_cast<int>(s.compress_ratios.size());
  auto ratio = [&](int i) { return i >= 0 && i < n ? s.compress_ratios[i] : -1; };
  for (int i : s.kv_source_layer_ids) {
    if (ratio(i) <= 0) {
      e.Add("kv_source_layer_ids",
            "layer " + std::to_string(i) + " must exist and have compress_ratios[i] > 0");
    } else if (!s.IsIndexSource(i)) {
      e.Add("kv_source_layer_ids", "layer " + std::to_string(i) +
                                       " is not in index_source_layer_ids; a KV source without "
                                       "indexer keys is not supported");
    }
  }
  for (int i : s.index_source_layer_ids) {
    if (ratio(i) <= 0) {
      e.Add("index_source_layer_ids",
            "layer " + std::to_string(i) + " must exist and have compress_ratios[i] > 0");
    } else if (s.KvSourceOf(i) < 0) {
      e.Add("index_source_layer_ids",
            "layer " + std::to_string(i) + " needs a kv_source_layer_ids entry at or before it");
    }
  }
  const int cand = s.candidate_source_layer_id;
  if (cand >= 0 && !s.IsIndexSource(cand)) {
    e.Add("candidate_source_layer_id",
          "= " + std::to_string(cand) + " must be one of index_source_layer_ids");
  }
  for (int i = 0; i < n; ++i) {
    if (ratio(i) == 0) continue;
    const std::string layer = "layer " + std::to_string(i);
    const int src = s.KvSourceOf(i), idx = s.IndexSourceOf(i);
    if (src < 0) {
      e.Add("kv_source_layer_ids",
            layer + " (compress_ratios > 0) has no KV source at or before it");
      continue;
    }
    if (ratio(src) != ratio(i)) {
      e.Add("compress_ratios", layer + " has ratio " + std::to_string(ratio(i)) +
                                   " but reads the compressed KV of layer " + std::to_string(src) +
                                   " (ratio " + std::to_string(ratio(src)) +
                                   "); mixed ratios in one group are not supported");
    }
    if (idx < 0 || s.KvSourceOf(idx) != src) {
      e.Add("index_source_layer_ids", layer + " has no index source in its KV group (layers " +
                                          std::to_string(src) +
                                          "..); a group without one is not supported");
    }
    if (cand >= 0 && s.IsIndexSource(i) && i > cand && s.KvSourceOf(cand) != src) {
      e.Add("candidate_source_layer_id", "index source " + std::to_string(i) +
                                             " reads other keys than the candidate source " +
                                             std::to_string(cand) + "; not supported");
    }
  }
  if (cand >= 0 && (s.candidate_topk_blocks <= 0 || s.candidate_block_size <= 0)) {
    e.Add("candidate_topk_blocks", "and candidate_block_size must be > 0");
  }
}

void CheckEngram(const ModelConfig& c, FieldErrors& e) {
  const DeepseekV41Settings& s = c.dsv41;
  if (s.engram_layer_ids.empty()) return;
  if (s.engram_num_embeddings.size() != s.engram_layer_ids.size()) {
    e.Add("engram_num_embeddings", "has " + std::to_string(s.engram_num_embeddings.size()) +
                                       " entries; engram_layer_ids has " +
                                       std::to_string(s.engram_layer_ids.size()));
  }
  for (int l : s.engram_layer_ids) {
    if (l < 0 || l >= c.num_layers)
      e.Add("engram_layer_ids", "layer " + std::to_string(l) + " does not exist");
  }
  if (s.engram_max_ngram_size < 2) e.Add("engram_max_ngram_size", "must be >= 2");
  if (s.engram_n_heads <= 0) e.Add("engram_n_heads", "must be > 0");
  if (s.engram_head_dim <= 0 || s.engram_head_dim % 32 != 0) {
    e.Add("engram_head_dim", "must be a positive multiple of 32 (the table's scale blocks)");
  }
  if (s.engram_compressed_vocab_size <= 0) e.Add("engram_compressed_vocab_size", "must be > 0");
  if (s.engram_vocab_size <= 0) e.Add("engram_vocab_size", "must be > 0");
}

void ReadCommon(Reader& r, ModelConfig* c) {
  DeepseekV4Settings& d = c->dsv4;
  r.Int("vocab_size", &c->vocab_size);
  r.Int("hidden_size", &c->hidden_size);
  r.Int("num_hidden_layers", &c->num_layers);
  r.Int("num_attention_heads", &c->num_heads);
  r.Int("num_key_value_heads", &c->num_kv_heads, false);
  r.Int("head_dim", &c->head_dim);
  r.Float("rms_norm_eps", &c->rms_norm_eps, false);
  r.Int("max_position_embeddings", &c->max_position_embeddings, false);
  r.Bool("tie_word_embeddings", &c->tie_word_embeddings);
  r.IntList("eos_token_id", &c->eos_token_ids);
  r.Int("hc_mult", &c->residual_streams, false);
  r.Int("n_routed_experts", &c->moe.num_experts, false);
  r.Int("num_experts_per_tok", &c->moe.top_k, false);
  r.Int("moe_intermediate_size", &c->moe.intermediate_size, false);
  r.Int("n_shared_experts", &c->moe.num_shared_experts, false);
  c->moe.shared_intermediate_size = c->moe.intermediate_size;
  c->intermediate_size = c->moe.intermediate_size;
  r.Int("q_lora_rank", &d.q_lora_rank, false);
  r.Int("o_groups", &d.o_groups, false);
  r.Int("o_lora_rank", &d.o_lora_rank, false);
  r.Int("sliding_window", &d.sliding_window, false);
  r.Int("hc_sinkhorn_iters", &d.hc_sinkhorn_iters, false);
  r.Float("hc_eps", &d.hc_eps, false);
  r.Int("index_n_heads", &d.index_n_heads, false);
  r.Int("index_head_dim", &d.index_head_dim, false);
  r.Int("index_topk", &d.index_topk, false);
  r.Float("swiglu_limit", &d.swiglu_limit, false);
  r.Float("routed_scaling_factor", &d.routed_scaling_factor, false);
  r.Int("qk_rope_head_dim", &d.rope_head_dim, false);
  DeepseekV41Settings& s = c->dsv41;
  r.Int("candidate_topk_blocks", &s.candidate_topk_blocks, false);
  r.Int("candidate_block_size", &s.candidate_block_size, false);
  r.Float("gate_temp", &s.gate_temp, false);
  r.Int("num_nextn_predict_layers", &s.num_nextn_predict_layers, false);
}

// The DSpark fields, with the reference's defaults; the draft MoE's 0 (vLLM: "the backbone's")
// resolves to the backbone's count, and absent target layers are derived as the reference
// derives them: the last three backbone layers that are not KV sources.
void ReadDspark(const json& doc, Reader& r, ModelConfig* c) {
  DeepseekV41Settings& s = c->dsv41;
  r.Int("dspark_block_size", &s.dspark_block_size, false);
  r.Int("dspark_noise_token_id", &s.dspark_noise_token_id, false);
  r.Int("dspark_markov_rank", &s.dspark_markov_rank, false);
  r.Int("dspark_n_routed_experts", &s.dspark_n_routed_experts, false);
  r.Int("dspark_num_experts_per_tok", &s.dspark_num_experts_per_tok, false);
  if (s.dspark_n_routed_experts == 0) s.dspark_n_routed_experts = c->moe.num_experts;
  if (s.dspark_num_experts_per_tok == 0) s.dspark_num_experts_per_tok = c->moe.top_k;
  if (!OptionalInts(doc, "dspark_target_layer_ids", r, &s.dspark_target_layer_ids)) {
    std::vector<int> plain;
    for (int i = 0; i < c->num_layers; ++i) {
      if (!s.IsKvSource(i)) plain.push_back(i);
    }
    s.dspark_target_layer_ids.assign(plain.end() - std::min<size_t>(3, plain.size()), plain.end());
  }
}

// Checked only when the checkpoint declares draft layers (num_nextn_predict_layers > 0).
void CheckDspark(const ModelConfig& c, FieldErrors& e) {
  const DeepseekV41Settings& s = c.dsv41;
  if (s.num_nextn_predict_layers < 0) {
    e.Add("num_nextn_predict_layers", "must be >= 0, got " +
                                          std::to_string(s.num_nextn_predict_layers));
  }
  if (s.num_nextn_predict_layers <= 0) return;
  if (s.dspark_block_size < 1) {
    e.Add("dspark_block_size", "must be >= 1, got " + std::to_string(s.dspark_block_size));
  }
  if (s.dspark_noise_token_id < 0 || s.dspark_noise_token_id >= c.vocab_size) {
    e.Add("dspark_noise_token_id", "= " + std::to_string(s.dspark_noise_token_id) +
                                       " must be a token id below vocab_size (" +
                                       std::to_string(c.vocab_size) + ")");
  }
  if (s.dspark_markov_rank < 1) {
    e.Add("dspark_markov_rank", "must be >= 1, got " + std::to_string(s.dspark_markov_rank));
  }
  if (s.dspark_n_routed_experts < 1) {
    e.Add("dspark_n_routed_experts",
          "must be >= 1 (0: the backbone's), got " + std::to_string(s.dspark_n_routed_experts));
  }
  if (s.dspark_num_experts_per_tok < 1 ||
      s.dspark_num_experts_per_tok > s.dspark_n_routed_experts) {
    e.Add("dspark_num_experts_per_tok",
          "= " + std::to_string(s.dspark_num_experts_per_tok) + " must be in 1.." +
              std::to_string(s.dspark_n_routed_experts) + " (dspark_n_routed_experts)");
  }
  const std::vector<int>& ids = s.dspark_target_layer_ids;
  if (ids.empty()) e.Add("dspark_target_layer_ids", "must name at least one backbone layer");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.num_layers) {
      e.Add("dspark_target_layer_ids", "layer " + std::to_string(ids[i]) +
                                           " is not a backbone layer (0.." +
                                           std::to_string(c.num_layers - 1) + ")");
    } else if (i > 0 && ids[i] <= ids[i - 1]) {
      e.Add("dspark_target_layer_ids", "must be strictly increasing");
    }
  }
}

// rope_parameters' per-table partial_rotary_factor must agree with qk_rope_head_dim / head_dim
// (the RoPE channels come from qk_rope_head_dim).
void CheckPartialRotary(const json& doc, Reader& r, const ModelConfig& c) {
  if (!doc.contains("rope_parameters") || !doc["rope_parameters"].is_object()) return;
  for (const char* table : {"main", "compress"}) {
    const json& rp = doc["rope_parameters"];
    if (!rp.contains(table) || !rp[table].is_object()) continue;
    const json& t = rp[table];
    if (!t.contains("partial_rotary_factor") || !t["partial_rotary_factor"].is_number()) continue;
    const double factor = t["partial_rotary_factor"].get<double>();
    if (static_cast<int>(factor * c.head_dim + 0.5) != c.dsv4.rope_head_dim) {
      r.Bad(std::string("rope_parameters.") + table + ".partial_rotary_factor",
            "= " + t["partial_rotary_factor"].dump() + " gives " +
                std::to_string(static_cast<int>(factor * c.head_dim + 0.5)) +
                " RoPE channels but qk_rope_head_dim is " + std::to_string(c.dsv4.rope_head_dim));
    }
  }
}

void RefuseUnsupported(Reader& r, const ModelConfig& c) {
  r.Refuse("scoring_func", "sqrtsoftplus", "only the sqrtsoftplus router is implemented");
  r.Refuse("topk_method", "noaux_tc", "only noaux_tc routing is implemented");
  r.Refuse("hidden_act", "silu", "only SiLU experts are implemented");
  r.Refuse("attention_bias", false, "attention biases are not implemented");
  r.Refuse("norm_topk_prob", true, "V4.1 renormalises the selected weights; set true");
  if (c.num_kv_heads != 1) {
    r.Bad("num_key_value_heads", "= " + std::to_string(c.num_kv_heads) +
                                     " is not supported (V4.1 has one shared KV head; set 1)");
  }
  if (c.moe.num_shared_experts != 1) {
    r.Bad("n_shared_experts", "= " + std::to_string(c.moe.num_shared_experts) +
                                  " is not supported (V4.1 has one shared expert; set 1)");
  }
  if (c.dsv41.gate_temp <= 0) r.Bad("gate_temp", "must be > 0");
}

// The released defaults of DeepseekV41TextConfig that the parser may leave in place.
ModelConfig Defaults() {
  ModelConfig c;
  c.model_type = "deepseek_v41";
  c.qk_norm = false;
  c.rope_theta = 10000.0;
  c.num_kv_heads = 1;
  c.residual_streams = 4;
  c.rms_norm_eps = 1e-20f;
  c.max_position_embeddings = 1048576;
  c.moe = {.num_experts = 384,
           .top_k = 6,
           .intermediate_size = 2304,
           .norm_topk_prob = true,
           .num_shared_experts = 1};
  DeepseekV4Settings& d = c.dsv4;
  d = {.q_lora_rank = 1280,
       .o_groups = 8,
       .o_lora_rank = 1024,
       .rope_head_dim = 64,
       .sliding_window = 128,
       .index_n_heads = 32,
       .index_head_dim = 128,
       .index_topk = 512,
       .swiglu_limit = 10.0f,
       .routed_scaling_factor = 1.5f};
  c.dsv41.candidate_topk_blocks = 2048;
  c.dsv41.candidate_block_size = 8;
  c.dsv41.num_nextn_predict_layers = 3;
  c.dsv41.dspark_block_size = 5;
  c.dsv41.dspark_noise_token_id = 128799;
  c.dsv41.dspark_markov_rank = 256;
  c.dsv41.dspark_n_routed_experts = 128;
  c.dsv41.dspark_num_experts_per_tok = 3;
  return c;
}

// Adds every inconsistent field to `e`.
void Validate(const ModelConfig& c, FieldErrors& e) {
  const DeepseekV4Settings& d = c.dsv4;
  auto positive = [&](const char* key, int v) {
    if (v <= 0) e.Add(key, "must be > 0, got " + std::to_string(v));
  };
  for (auto [key, v] : {std::pair{"q_lora_rank", d.q_lora_rank},
                        {"o_groups", d.o_groups},
                        {"o_lora_rank", d.o_lora_rank},
                        {"sliding_window", d.sliding_window},
                        {"hc_mult", c.residual_streams},
                        {"hc_sinkhorn_iters", d.hc_sinkhorn_iters},
                        {"index_n_heads", d.index_n_heads},
                        {"index_head_dim", d.index_head_dim},
                        {"index_topk", d.index_topk}}) {
    positive(key, v);
  }
  if (d.rope_head_dim <= 0 || d.rope_head_dim % 2 != 0 || d.rope_head_dim > c.head_dim ||
      d.rope_head_dim > d.index_head_dim) {
    e.Add("qk_rope_head_dim", "= " + std::to_string(d.rope_head_dim) +
                                  " must be even, > 0 and <= head_dim and index_head_dim");
  }
  if (d.o_groups > 0 && c.num_heads % d.o_groups != 0) {
    e.Add("o_groups", "must divide num_attention_heads (" + std::to_string(c.num_heads) + ")");
  }
  if (d.swiglu_limit < 0) e.Add("swiglu_limit", "must be >= 0");
  CheckSchedule(c, e);
  CheckEngram(c, e);
  CheckDspark(c, e);
}

Result<ModelConfig> ParseText(const json& doc, const std::string& path) {
  ModelConfig c = Defaults();
  FieldErrors errors;
  Reader r(doc, &errors);
  ReadCommon(r, &c);
  dsv4::ReadDeepseekRope(doc, r, &c);
  ReadSchedule(doc, r, std::max(c.num_layers, 0), &c.dsv41);
  ReadEngram(doc, r, &c.dsv41);
  ReadDspark(doc, r, &c);
  RefuseUnsupported(r, c);
  CheckPartialRotary(doc, r, c);
  c.layers.assign(std::max(c.num_layers, 0), core::LayerSpec{});
  for (int i = 0; i < c.num_layers; ++i) {
    const bool compressed =
        i < static_cast<int>(c.dsv41.compress_ratios.size()) && c.dsv41.compress_ratios[i] > 0;
    c.layers[i] = {
        compressed ? core::AttentionType::kCompressedSparse : core::AttentionType::kSliding,
        core::MlpType::kMoe};
  }
  Validate(c, errors);
  SPARK_RETURN_IF_ERROR(errors.ToStatus(path));
  SPARK_RETURN_IF_ERROR(c.Validate(path));
  return c;
}

// The composite form's quantization_config: the released FP8 layout (the loader reads the
// block size from each scale tensor) or nothing.
Status CheckQuantization(const json& doc, const std::string& path) {
  if (!doc.contains("quantization_config") || doc["quantization_config"].is_null()) {
    return Status::Ok();
  }
  const json& q = doc["quantization_config"];
  FieldErrors e;
  if (!q.is_object()) {
    e.Add("quantization_config", "must be an object");
  } else {
    const std::string method = core::StringOr(q, "quant_method", "");
    if (method != "fp8") {
      e.Add("quantization_config.quant_method",
            "= \"" + method + "\" is not supported (only the released \"fp8\" layout)");
    }
    const std::string fmt = core::StringOr(q, "fmt", "e4m3");
    if (fmt != "e4m3") e.Add("quantization_config.fmt", "= \"" + fmt + "\" (only e4m3)");
  }
  return e.ToStatus(path);
}

}  // namespace

Result<ModelConfig> ParseDeepseekV41Config(const json& doc, const std::string& path) {
  const std::string type = core::StringOr(doc, "model_type", "");
  if (type == "deepseek_v41_text") return ParseText(doc, path);
  SPARK_RETURN_IF_ERROR(CheckQuantization(doc, path));
  if (!doc.contains("text_config") || !doc["text_config"].is_object()) {
    return InvalidArgumentError(path + ": text_config: missing; a \"deepseek_v41\" config.json " +
                                "holds the text model under text_config");
  }
  json text = doc["text_config"];
  // The composite form keeps some keys at the top level (tie_word_embeddings, eos ids).
  for (const char* k : {"tie_word_embeddings", "eos_token_id"}) {
    if (!text.contains(k) && doc.contains(k)) text[k] = doc[k];
  }
  return ParseText(text, path + ": text_config");
}

std::string DescribeDspark(const ModelConfig& c) {
  if (c.model_type != "deepseek_v41") {
    return "checkpoint has no DSpark draft layers (model type " + c.model_type +
           "; DSpark is DeepSeek-V4.1's)";
  }
  const DeepseekV41Settings& s = c.dsv41;
  const int n = s.num_nextn_predict_layers;
  if (n <= 0) return "checkpoint has no DSpark draft layers (num_nextn_predict_layers 0)";
  std::string layers;
  for (int id : s.dspark_target_layer_ids) {
    layers += (layers.empty() ? "" : ", ") + std::to_string(id);
  }
  return "checkpoint has " + std::to_string(n) + " DSpark draft layer" + (n == 1 ? "" : "s") +
         " (mtp.0" + (n == 1 ? "" : ".." + std::to_string(n - 1)) +
         ": block " + std::to_string(s.dspark_block_size) + ", noise token " +
         std::to_string(s.dspark_noise_token_id) + ", Markov rank " +
         std::to_string(s.dspark_markov_rank) + ", " + std::to_string(s.dspark_n_routed_experts) +
         " experts top " + std::to_string(s.dspark_num_experts_per_tok) +
         ", reading backbone layers " + layers + ")";
}

}  // namespace spark::engine::model::dsv41
