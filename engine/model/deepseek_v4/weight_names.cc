#include "engine/model/deepseek_v4/weight_names.h"

#include <utility>

namespace spark::engine::model::dsv4 {
namespace {

// Released name -> transformers module name; whole names first, then the part after
// "layers.N." of per-layer tensors.
constexpr std::pair<const char*, const char*> kTopLevel[] = {
    {"embed.weight", "model.embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight"},          {"hc_head_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base"},     {"hc_head_scale", "model.hc_head.hc_scale"},
};

constexpr std::pair<const char*, const char*> kPerLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attn.wkv.weight", "self_attn.kv_proj.weight"},
    {"attn.kv_norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
    {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
    {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
    {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
    {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
};

// transformers' save_pretrained writes the attention's kv norm as "attn.norm.weight".
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"attn.kv_norm.weight", "attn.norm.weight"},
};

}  // namespace

std::vector<std::string> CandidateNames(const std::string& canonical) {
  std::vector<std::string> names = {canonical, "model." + canonical};
  for (const auto& [released, module] : kTopLevel) {
    if (canonical == released) names.push_back(module);
  }
  if (canonical.rfind("layers.", 0) != 0) return names;
  const size_t dot = canonical.find('.', 7);
  if (dot == std::string::npos) return names;
  const std::string prefix = canonical.substr(0, dot + 1), rest = canonical.substr(dot + 1);
  for (const auto& [released, alias] : kAliases) {
    if (rest == released) {
      names.push_back(prefix + alias);
      names.push_back("model." + prefix + alias);
    }
  }
  for (const auto& [released, module] : kPerLayer) {
    if (rest == released) names.push_back("model." + prefix + module);
  }
  return names;
}

bool IsIgnoredTensor(const std::string& name) {
  return name.rfind("mtp.", 0) == 0 || name.rfind("model.mtp.", 0) == 0;
}

}  // namespace spark::engine::model::dsv4
