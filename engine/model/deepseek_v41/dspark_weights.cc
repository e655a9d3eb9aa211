#include "engine/model/deepseek_v41/dspark_weights.h"

#include "engine/model/deepseek_v4/tensor_loader.h"

namespace spark::engine::model::dsv41 {
namespace {

bool IsDraft(const std::string& name) { return name.rfind("mtp.", 0) == 0; }

std::vector<std::string> SameName(const std::string& canonical) { return {canonical}; }

// Everything but mtp.* belongs to the backbone's loader.
bool NotDraft(const std::string& name) { return !IsDraft(name); }

}  // namespace

core::ModelConfig DraftConfig(const core::ModelConfig& config) {
  core::ModelConfig c = config;
  c.moe.num_experts = config.dsv41.dspark_n_routed_experts;
  c.moe.top_k = config.dsv41.dspark_num_experts_per_tok;
  return c;
}

Result<DraftWeights> LoadDraftWeights(const dsv4::TensorSource& source,
                                      const core::ModelConfig& config, dsv4::WeightTypes types,
                                      const TpShard& shard, MoeSharding moe,
                                      dsv4::ReadObserver on_read) {
  const core::DeepseekV41Settings& s = config.dsv41;
  const int stages = s.num_nextn_predict_layers;
  if (stages < 1) {
    return FailedPreconditionError(source.dir() +
                                   ": config.json declares no DSpark draft layers "
                                   "(num_nextn_predict_layers is 0)");
  }
  const core::ModelConfig c = DraftConfig(config);
  dsv4::Loader ld(source, std::move(on_read), {SameName, NotDraft}, types);
  DraftWeights w;
  w.stack.types = types;
  SPARK_ASSIGN_OR_RETURN(w.stack.ranges, dsv4::PlanShard(c, shard, moe));
  const int64_t hidden = c.hidden_size, n = c.residual_streams;
  w.stack.layers.resize(stages);
  for (int j = 0; j < stages; ++j) {
    const std::string p = "mtp." + std::to_string(j) + ".";
    dsv4::LayerWeights& l = w.stack.layers[j];
    l.attention = core::AttentionType::kSliding;
    l.mlp = core::MlpType::kMoe;
    SPARK_RETURN_IF_ERROR(dsv4::LoadHc(ld, p, "attn", n, hidden, &l.hc_attn));
    SPARK_RETURN_IF_ERROR(dsv4::LoadHc(ld, p, "ffn", n, hidden, &l.hc_ffn));
    SPARK_RETURN_IF_ERROR(dsv4::LoadAttentionCore(ld, p, c, w.stack.ranges, &l));
    SPARK_RETURN_IF_ERROR(
        dsv4::LoadMoeAt(ld, source, p, c.num_layers + j, c, w.stack.ranges, &l));
    // A vision checkpoint's MoE layers may carry the image-token router bias; draft blocks
    // never hold image tokens (and this engine serves text), so it is checked and not kept.
    if (ld.Has(p + "ffn.gate.bias_vl")) {
      SPARK_RETURN_IF_ERROR(ld.Float(p + "ffn.gate.bias_vl", {int64_t{c.moe.num_experts}}).status());
    }
  }
  const auto targets = static_cast<int64_t>(s.dspark_target_layer_ids.size());
  SPARK_ASSIGN_OR_RETURN(dsv4::Mat proj, ld.Matrix("mtp.0.main_proj.weight", {hidden, hidden * targets}));
  for (int64_t k = 0; k < targets; ++k) {
    w.main_proj.push_back(dsv4::SliceCols(proj, {k * hidden, hidden}));
  }
  SPARK_ASSIGN_OR_RETURN(w.main_norm, ld.Float("mtp.0.main_norm.weight", {hidden}));
  const std::string last = "mtp." + std::to_string(stages - 1) + ".";
  const int64_t vocab = c.vocab_size, rank = s.dspark_markov_rank;
  SPARK_ASSIGN_OR_RETURN(w.norm, ld.Float(last + "norm.weight", {hidden}));
  SPARK_ASSIGN_OR_RETURN(w.markov_embed, ld.Float(last + "markov_head.embed.weight", {vocab, rank}));
  SPARK_ASSIGN_OR_RETURN(w.markov_head, ld.Float(last + "markov_head.head.weight", {vocab, rank}));
  if (ld.Has(last + "confidence_head.proj.weight")) {
    SPARK_RETURN_IF_ERROR(
        ld.Float(last + "confidence_head.proj.weight", {1, hidden + rank}).status());
  }
  SPARK_RETURN_IF_ERROR(ld.CheckAllUsed());
  return w;
}

}  // namespace spark::engine::model::dsv41
