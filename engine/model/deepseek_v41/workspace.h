// The activations of one DeepSeek-V4.1 forward step in backend memory, sized for its token count,
// this rank's shards and the step's candidate width, allocated once per step and reused by every
// layer.
// Thread-safety: owned by the step.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv41 {

struct Workspace {
  int64_t tokens = 0;
  int stride = 0;  // candidate width of the step (StepPlan::stride)
  // Residual streams [tokens, N, hidden]; a block's input and output [tokens, hidden]; mHC
  // weights: the pre of the previous site and of this one [tokens, N] (the one-site lag), post
  // [tokens, N], comb [tokens, N, N].
  backend::Buffer streams, block_in, block_out, pre_prev, pre, post, comb;
  // Attention: qr [tokens, q_lora], q and o [tokens, heads, D], kv [tokens, D], grouped
  // [tokens, groups, o_lora]; the compressor's kv and gate [tokens, D], the pooled latents and
  // their indexer keys [tokens, D] / [tokens, dI]; indexer queries [tokens, index heads, dI],
  // head weights [tokens, index heads], selection [tokens, index_topk], the candidate source's
  // scores and the candidate-block mask [tokens, stride].
  backend::Buffer qr, q, o, kv, grouped, comp_kv, comp_gate, latent, index_key, idx_q, idx_w,
      selected, scores, candidate_mask;
  // MoE: router logits [tokens, experts], expert ids and weights [tokens, top_k].
  backend::Buffer router, expert_ids, expert_weights;
  // Engram: gathered rows [tokens, columns * engram_head_dim], keys and value
  // [tokens, (N + 1) hidden], compressed token ids [tokens].
  backend::Buffer engram_rows, engram_kv, token_ids;
};

// Floats per token of the workspace (what AllocateWorkspace asks the backend for, over tokens).
int64_t WorkspaceFloatsPerToken(const core::ModelConfig& config, const dsv4::ShardRanges& ranges,
                                int stride, int engram_columns);

// ResourceExhausted when the backend cannot hold it.
Result<Workspace> AllocateWorkspace(backend::Backend& backend, const core::ModelConfig& config,
                                    const dsv4::ShardRanges& ranges, int64_t tokens, int stride,
                                    int engram_columns);

}  // namespace spark::engine::model::dsv41
