// The weights of one tensor-parallel rank of a Qwen3 or Qwen3-MoE model, in backend memory.
//
// Loading reads only the rank's slices from the checkpoint (tp_shard.h says which) and converts
// them to fp32, or to bf16 or fp8 (128 x 128 block scales) for the Linear matrices when asked.
// FP8 checkpoints (F8_E4M3 weights with 128 x 128 block scales in "<name>_scale_inv", as
// Qwen3-FP8 ships) are dequantised on the way. Gate and up projections are stored fused as one
// [2 x inter, hidden] matrix (gate rows, then up rows) so one GEMM computes both; q, k and v
// likewise stack (with fp8 weights, three matrices).
// Thread-safety: read-only after loading.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/core/checkpoint.h"
#include "engine/core/model_config.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::qwen3 {

struct Qwen3LayerWeights {
  core::MlpType mlp = core::MlpType::kDense;
  backend::Buffer input_norm, post_attention_norm;  // [hidden]
  backend::Buffer qkv;      // q, k and v rows stacked: one matrix, so a backend may run one GEMM
  backend::Buffer q, k, v;  // views into qkv: [local (kv) heads * head_dim, hidden]; with fp8
                            // weights three matrices of their own (qkv empty)
  backend::Buffer q_norm, k_norm;  // [head_dim]
  backend::Buffer o;               // [hidden, local heads * head_dim]
  backend::Buffer gate_up, down;   // dense MLP: [2 * inter_l, hidden], [hidden, inter_l]
  backend::Buffer router;          // MoE: [num_experts, hidden], replicated
  std::vector<backend::Buffer> expert_gate_up, expert_down;  // MoE: this rank's experts

  // Points q, k and v at their rows of qkv ([q_rows + 2 * kv_rows, hidden]).
  void SplitQkv(int64_t q_rows, int64_t kv_rows, int64_t hidden) {
    q = qkv.View(0, q_rows * hidden);
    k = qkv.View(q_rows * hidden, kv_rows * hidden);
    v = qkv.View((q_rows + kv_rows) * hidden, kv_rows * hidden);
  }
};

struct Qwen3Weights {
  Range heads, kv_heads, vocab;
  int dense_inter = 0;         // dense MLP intermediate channels on this rank
  int expert_inter = 0;        // per-expert intermediate channels on this rank
  int expert_begin = 0;        // first expert held (by-expert sharding), else 0
  backend::Buffer embed;       // [vocab.size, hidden]
  backend::Buffer lm_head;     // [vocab.size, hidden]; empty when tied to embed
  backend::Buffer final_norm;  // [hidden]
  std::vector<Qwen3LayerWeights> layers;

  backend::WeightRef lm_head_weight() const {
    return lm_head.empty() ? backend::WeightRef(embed.data()) : lm_head.weight();
  }
};

// NotFound / InvalidArgument (shape disagrees with config.json, or the backend keeps no
// `matrix_dtype` weights) / DataLoss naming the tensor. `matrix_dtype` is the type of q, k, v,
// o, the dense and expert gate_up/down and lm_head; the rest (embedding, norms, router) is fp32.
Result<Qwen3Weights> LoadQwen3Weights(const core::Checkpoint& ckpt, const core::ModelConfig& config,
                                      const TpShard& shard, MoeSharding moe_sharding,
                                      backend::DType matrix_dtype, backend::Backend& backend);

}  // namespace spark::engine::model::qwen3
