#include "engine/model/deepseek_v4/moe.h"

#include <algorithm>

#include "engine/model/deepseek_v4/ops.h"

namespace spark::engine::model::dsv4 {

void Moe::Route(int layer, const float* router_logits, int32_t token_id, std::vector<int>* experts,
                std::vector<float>* weights) const {
  const LayerWeights& l = w_.layers[layer];
  const int e = c_.moe.num_experts, k = c_.moe.top_k;
  std::vector<float> scores(e), biased(e);
  for (int i = 0; i < e; ++i) scores[i] = SqrtSoftplus(router_logits[i]);
  if (l.mlp == core::MlpType::kHashMoe) {
    experts->assign(l.tid2eid.begin() + int64_t{token_id} * k,
                    l.tid2eid.begin() + int64_t{token_id} * k + k);
  } else {
    for (int i = 0; i < e; ++i) biased[i] = scores[i] + l.router_bias[i];
    *experts = TopK(biased, k);
  }
  float sum = 0;
  for (int i : *experts) sum += scores[i];
  weights->clear();
  for (int i : *experts) {
    weights->push_back(scores[i] / (sum + 1e-20f) * c_.dsv4.routed_scaling_factor);
  }
}

void Moe::SwiGlu(const float* x, const Vec& gate_up, const Vec& down, int inter, float weight,
                 float* out) const {
  const int hidden = c_.hidden_size;
  const float limit = c_.dsv4.swiglu_limit;
  std::vector<float> gu(2 * inter), act(inter), y(hidden);
  backend_.Linear(x, 1, hidden, gate_up.data(), 2 * inter, gu.data());
  for (int i = 0; i < inter; ++i) {
    float gate = gu[i], up = gu[inter + i];
    if (limit > 0) {
      gate = std::min(gate, limit);
      up = std::clamp(up, -limit, limit);
    }
    act[i] = Silu(gate) * up;
  }
  backend_.Linear(act.data(), 1, inter, down.data(), hidden, y.data());
  for (int h = 0; h < hidden; ++h) out[h] += weight * y[h];
}

void Moe::Forward(int layer, const float* x, std::span<const int32_t> token_ids, float* out) const {
  const LayerWeights& l = w_.layers[layer];
  const int hidden = c_.hidden_size, e = c_.moe.num_experts;
  const int64_t n = static_cast<int64_t>(token_ids.size());
  const ShardRanges& r = w_.ranges;
  const int expert_inter = static_cast<int>(r.expert_channels.size);
  const int shared_inter = static_cast<int>(r.shared_channels.size);
  std::vector<float> logits(n * e);
  backend_.Linear(x, n, hidden, l.router.data(), e, logits.data());
  std::vector<int> experts;
  std::vector<float> weights;
  for (int64_t t = 0; t < n; ++t) {
    float* y = out + t * hidden;
    std::fill(y, y + hidden, 0.0f);
    Route(layer, &logits[t * e], token_ids[t], &experts, &weights);
    for (size_t i = 0; i < experts.size(); ++i) {
      const int64_t local = experts[i] - r.experts.begin;
      if (local < 0 || local >= r.experts.size) continue;  // another rank's expert
      SwiGlu(x + t * hidden, l.expert_gate_up[local], l.expert_down[local], expert_inter,
             weights[i], y);
    }
    SwiGlu(x + t * hidden, l.shared_gate_up, l.shared_down, shared_inter, 1.0f, y);
  }
}

}  // namespace spark::engine::model::dsv4
