// DeepSeek-V4 MoE block as backend ops: router logits (Linear), then DeepseekOps::Route
// (scores sqrt(softplus(x Wg^T)); top-k layers select by score + e_score_correction_bias, the
// bias steering selection only; hash layers take tid2eid[token id]; weights = selected scores /
// their sum x routed_scaling_factor) and DeepseekOps::MoeExperts (each expert and the always-on
// shared expert SwiGLU with gate clamped above and up clamped to +-swiglu_limit; output =
// routed + shared).
// Under tensor parallelism a rank adds only its experts (or its channels of every expert) and its
// channels of the shared expert; routing is computed identically on every rank, and the partial
// outputs are all-reduced once.
// Thread-safety: read-only object; one call at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v4/workspace.h"

namespace spark::engine::model::dsv4 {

class Moe {
 public:
  Moe(const core::ModelConfig& config, const BackendWeights& weights, backend::Backend& backend,
      backend::DeepseekOps& ops);

  // The buffers of one call (backend memory): input [tokens, hidden] (ffn_norm applied), output
  // [tokens, hidden], router logits [tokens, experts], expert ids and weights [tokens, top_k].
  struct Io {
    const float* in;
    float* out;
    float* router;
    float* ids;
    float* weights;
    int64_t tokens;
  };
  // io.out = the MoE of `layer` for io.in.
  void Forward(int layer, std::span<const int32_t> token_ids, const Io& io) const;

 private:
  const core::ModelConfig& c_;
  const BackendWeights& w_;
  backend::Backend& backend_;
  backend::DeepseekOps& ops_;
  std::vector<std::vector<backend::SwiGluWeights>> experts_;  // per layer, this rank's experts
};

}  // namespace spark::engine::model::dsv4
