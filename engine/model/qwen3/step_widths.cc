#include "engine/model/qwen3/step_widths.h"

#include <algorithm>

namespace spark::engine::model::qwen3 {

StepWidths MakeStepWidths(const core::ModelConfig& c, int64_t heads, int64_t kv_heads,
                          int64_t inter) {
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  StepWidths w;
  w.h = w.x = w.tmp = hidden;
  w.qkv = (heads + 2 * kv_heads) * hd;
  w.q = w.attn = heads * hd;
  w.k = w.v = kv_heads * hd;
  w.gate_up = 2 * inter;
  w.act = inter;
  w.router = c.moe.num_experts;
  w.inter = inter;
  return w;
}

StepWidths PlannedStepWidths(const core::ModelConfig& c, const TpShard& shard, MoeSharding moe) {
  const bool has_moe = std::any_of(c.layers.begin(), c.layers.end(), [](const core::LayerSpec& l) {
    return l.mlp == core::MlpType::kMoe;
  });
  const int64_t dense = shard.Even(c.intermediate_size).size;
  const int64_t expert = !has_moe                        ? 0
                         : moe == MoeSharding::kByExpert ? c.moe.intermediate_size
                                                         : shard.Even(c.moe.intermediate_size).size;
  StepWidths w =
      MakeStepWidths(c, shard.Heads(c).size, shard.KvHeads(c).size, std::max(dense, expert));
  w.expert_inter = expert;
  return w;
}

}  // namespace spark::engine::model::qwen3
