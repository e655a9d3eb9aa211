// DeepSeek-V4 MoE block: router scores sqrt(softplus(x Wg^T)); top-k layers select by
// score + e_score_correction_bias (the bias steers selection only), hash layers take
// tid2eid[token id]; weights = selected scores / their sum x routed_scaling_factor. Each expert
// (and the always-on shared expert) is SwiGLU with gate clamped above and up clamped to
// +-swiglu_limit. Output = routed + shared.
// Under tensor parallelism a rank adds only its experts (or its channels of every expert) and its
// channels of the shared expert; routing is computed identically on every rank, and the partial
// outputs are all-reduced once.
// Thread-safety: read-only object; one call at a time.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {

class Moe {
 public:
  Moe(const core::ModelConfig& config, const Weights& weights, backend::Backend& backend)
      : c_(config), w_(weights), backend_(backend) {}

  // out [tokens, hidden] for x [tokens, hidden] (ffn_norm applied) of `layer`.
  void Forward(int layer, const float* x, std::span<const int32_t> token_ids, float* out) const;

  // The experts (and their weights) token `t` is routed to: exposed for tests.
  void Route(int layer, const float* router_logits, int32_t token_id, std::vector<int>* experts,
             std::vector<float>* weights) const;

 private:
  // out += weight * down(silu(min(gate, L)) * clamp(up, -L, L)) for one token, `inter` channels.
  void SwiGlu(const float* x, const Vec& gate_up, const Vec& down, int inter, float weight,
              float* out) const;

  const core::ModelConfig& c_;
  const Weights& w_;
  backend::Backend& backend_;
};

}  // namespace spark::engine::model::dsv4
