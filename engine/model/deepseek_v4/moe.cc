#include "engine/model/deepseek_v4/moe.h"

namespace spark::engine::model::dsv4 {

Moe::Moe(const core::ModelConfig& config, const BackendWeights& weights, backend::Backend& backend,
         backend::DeepseekOps& ops)
    : c_(config), w_(weights), backend_(backend), ops_(ops) {
  for (const LayerBuffers& l : w_.layers) {
    std::vector<backend::SwiGluWeights>& experts = experts_.emplace_back();
    for (size_t e = 0; e < l.expert_gate_up.size(); ++e) {
      experts.push_back({l.expert_gate_up[e].weight(), l.expert_down[e].weight()});
    }
  }
}

void Moe::Forward(int layer, std::span<const int32_t> token_ids, const Io& io) const {
  const LayerBuffers& l = w_.layers[layer];
  const int hidden = c_.hidden_size, experts = c_.moe.num_experts, k = c_.moe.top_k;
  const int64_t n = io.tokens;
  backend_.Linear(io.in, n, hidden, l.router.weight(), experts, io.router);
  const bool hash = l.mlp == core::MlpType::kHashMoe;
  ops_.Route({.logits = io.router,
              .tokens = n,
              .experts = experts,
              .top_k = k,
              .bias = hash ? nullptr : l.router_bias.data(),
              .hash_table = hash ? l.tid2eid.data() : nullptr,
              .token_ids = token_ids,
              .scaling = c_.dsv4.routed_scaling_factor,
              .temperature = c_.dsv41.gate_temp,
              .ids = io.ids,
              .weights = io.weights});
  const ShardRanges& r = w_.ranges;
  ops_.MoeExperts({.x = io.in,
                   .tokens = n,
                   .hidden = hidden,
                   .ids = io.ids,
                   .weights = io.weights,
                   .top_k = k,
                   .expert_begin = static_cast<int>(r.experts.begin),
                   .experts = experts_[layer],
                   .inter = static_cast<int>(r.expert_channels.size),
                   .shared = {l.shared_gate_up.weight(), l.shared_down.weight()},
                   .shared_inter = static_cast<int>(r.shared_channels.size),
                   .swiglu_limit = c_.dsv4.swiglu_limit,
                   .out = io.out});
}

}  // namespace spark::engine::model::dsv4
