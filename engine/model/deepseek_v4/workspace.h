// The activations of one DeepSeek-V4 forward step in backend memory, sized for its token count
// and this rank's shards, allocated once per step and reused by every layer (as Qwen3's).
// Thread-safety: owned by the step.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {

struct Workspace {
  int64_t tokens = 0;
  // Residual streams [tokens, N, hidden]; a block's input and output [tokens, hidden]; the mHC
  // weights of the current site: pre and post [tokens, N], comb [tokens, N, N].
  backend::Buffer streams, block_in, block_out, pre, post, comb;
  // Attention: qr [tokens, q_lora], q and o [tokens, heads, D], kv [tokens, D], the grouped
  // projection [tokens, groups, o_lora], compressor inputs [tokens, 2D] and the indexer's
  // [tokens, 2 dI], its queries [tokens, index heads, dI], head weights [tokens, index heads]
  // and selection [tokens, index_topk].
  backend::Buffer qr, q, kv, o, grouped, comp_kv, comp_gate, idx_kv, idx_gate, idx_q, idx_w,
      selected;
  // MoE: router logits [tokens, experts], expert ids and weights [tokens, top_k].
  backend::Buffer router, expert_ids, expert_weights;
};

// Floats per token of the workspace (what AllocateWorkspace asks the backend for, over tokens).
int64_t WorkspaceFloatsPerToken(const core::ModelConfig& config, const ShardRanges& ranges);

// ResourceExhausted when the backend cannot hold it.
Result<Workspace> AllocateWorkspace(backend::Backend& backend, const core::ModelConfig& config,
                                    const ShardRanges& ranges, int64_t tokens);

}  // namespace spark::engine::model::dsv4
