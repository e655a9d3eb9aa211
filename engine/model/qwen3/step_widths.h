// The activations of one Qwen3 forward step on one rank, as floats per token: Qwen3Model sizes
// its step workspace from these widths and the family row's step_memory counts the same ones,
// so the memory plan and the engine cannot drift apart.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/core/model_config.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::qwen3 {

struct StepWidths {
  int64_t h = 0, x = 0, tmp = 0;  // residual stream, norm output, scratch: hidden each
  int64_t qkv = 0;                // the stacked q/k/v projection
  int64_t q = 0, attn = 0;        // this rank's heads x head_dim
  int64_t k = 0, v = 0;           // this rank's KV heads x head_dim
  int64_t gate_up = 0, act = 0;   // 2 x and 1 x the widest MLP's channels on this rank
  int64_t router = 0;             // router logits (every expert; 0 for dense models)
  int64_t inter = 0;              // the widest MLP's channels on this rank (bf16 act copy)
  int64_t expert_inter = 0;       // an expert's channels on this rank (0 for dense models)

  int64_t FloatsPerToken() const {
    return h + x + tmp + qkv + q + attn + k + v + gate_up + act + router;
  }
};

// From this rank's head counts and MLP channels (Qwen3Weights::heads, kv_heads and the larger of
// dense_inter and expert_inter).
StepWidths MakeStepWidths(const core::ModelConfig& config, int64_t heads, int64_t kv_heads,
                          int64_t inter);

// The same from the tensor-parallel plan alone (what loading would give the rank).
StepWidths PlannedStepWidths(const core::ModelConfig& config, const TpShard& shard,
                             MoeSharding moe);

}  // namespace spark::engine::model::qwen3
