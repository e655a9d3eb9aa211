// DSpark drafting for DeepSeek-V4.1 (docs/speculative.md, "DSpark"): the checkpoint's draft
// stack (dspark_weights.h) proposes a block of tokens after the token the target just produced.
//
// Context: every target forward captures, for each of its tokens, the mean over the residual
// streams entering each dspark_target_layer_ids layer (before that layer's Engram), combines
// them into main_x = main_norm(main_proj [a_1 ; a_2 ; ...]) and writes each draft layer's
// window key of the token (wkv -> kv_norm -> RoPE -> FP8, as a target window key, from main_x
// with no attn_norm) at the token's slot in that draft layer's cache record. The draft layers
// never run over the context; only their key projection does.
// Block: one forward of the draft stack over N tokens at positions q0 .. q0 + N - 1, the anchor
// (the target's latest token, q0 its position) then N - 1 noise tokens (dspark_noise_token_id).
// Each draft layer is a V4.1 block without Engram whose attention is non-causal inside the
// block: every block token sees the sliding_window context keys before q0 and all N block keys
// (which the block writes at its own slots; a later target forward overwrites them with context
// keys). The streams collapse with the last FFN site's pre, the draft norm and the target's
// lm_head give base logits U_i for the token after position q0 + i; then left to right,
// prev = anchor: d_i = argmax(U_i + markov_head markov_embed[prev]), prev = d_i, each rank
// over its vocabulary slice (the lm_head's and markov_head's rows split alike), the slices'
// argmax pairs merged, so no logits row leaves the backend.
// A step's blocks (one per drafting sequence) run side by side in one forward: their tokens
// share the stack's matrix products and MoE, and each attends to its own sequence only.
// Every piece of draft state is a per-token key at a KV slot, so rejected tokens need no
// rollback. Under tensor parallelism every rank drafts in lockstep (a draft command,
// runtime/plan_broadcast.h) with the stack sharded as the backbone: the embedding, attention
// and MoE end in all-reduces, and the Markov step's argmax pairs are all-gathered, which gives
// every rank the same drafts.
// Thread-safety: one call at a time (the model's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v4/moe.h"
#include "engine/model/deepseek_v41/cache_layout.h"
#include "engine/model/deepseek_v41/dspark_weights.h"
#include "engine/model/deepseek_v41/workspace.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv41 {

class DSpark {
 public:
  // Uploads `host`. `target` (embedding, lm_head, RoPE tables) and `stream0` (the one-hot pre
  // before a first layer) must outlive this object. status() holds an upload error.
  DSpark(const core::ModelConfig& config, DraftWeights host, const CacheLayout& layout,
         const dsv4::BackendWeights& target, const backend::Buffer& stream0,
         backend::Backend& backend, backend::DeepseekOps& ops, comm::Communicator* comm);

  const Status& status() const { return status_; }
  int block_size() const { return config_.dsv41.dspark_block_size; }

  // Index of backbone `layer` in dspark_target_layer_ids, or -1.
  int CaptureIndex(int layer) const;
  // Starts a target forward of `tokens` tokens: room for its captures.
  Status BeginStep(int64_t tokens);
  // Capture `k` of the step: the mean over ws.streams of every token.
  void Capture(int k, const Workspace& ws);
  // The draft layers' context keys of the step's tokens, from its captures.
  void StoreContext(const ForwardBatch& batch, PagedKvCache& cache);

  // Drafts every block (Model::DraftTokens) in one forward of the stack: drafts[k] holds
  // blocks[k].count (1 .. 16, the same for every block) tokens. Each block table must cover
  // positions up to position + count - 1 and the context keys of every position before
  // `position` must be stored. InvalidArgument for a block table too short, blocks of
  // different sizes or a token outside the vocabulary.
  Status Draft(std::span<const DraftBlock> blocks, PagedKvCache& cache,
               std::vector<std::vector<int32_t>>* drafts);

 private:
  // A window key per token (wkv -> kv_norm -> RoPE -> FP8) of draft layer `l` from `in`.
  void WindowKeys(const dsv4::LayerBuffers& l, const float* in, int64_t tokens,
                  std::span<const int32_t> positions, float* keys) const;
  Status CheckBlock(const DraftBlock& b, int block_size) const;
  // The draft workspace and base logits for `tokens` rows, the Markov buffers for `blocks`.
  Status EnsureRows(int64_t tokens, int64_t blocks);
  // The stack over the blocks' tokens (ws.tokens of them) into ws.block_in: the normed hidden
  // states whose logits are the base logits.
  Status Forward(std::span<const int32_t> ids, std::span<const int32_t> positions,
                 std::span<const int64_t> slots, std::span<const backend::AttentionSequence> rows,
                 int block_window, PagedKvCache& cache, Workspace& ws);
  Status MarkovDrafts(std::span<const DraftBlock> blocks, int count,
                      std::vector<std::vector<int32_t>>* drafts);
  void Attention(int layer, std::span<const int32_t> positions, std::span<const int64_t> slots,
                 std::span<const backend::AttentionSequence> sequences, int window,
                 PagedKvCache& cache, Workspace& ws) const;
  Status AllReduce(backend::Buffer& data, int64_t count);

  const core::ModelConfig config_;  // the draft blocks' (DraftConfig)
  const CacheLayout& layout_;
  const dsv4::BackendWeights& target_;
  const backend::Buffer& stream0_;
  backend::Backend& backend_;
  backend::DeepseekOps& ops_;
  comm::Communicator* comm_;  // null on one rank
  Status status_;
  dsv4::BackendWeights stack_;
  std::vector<backend::Buffer> main_proj_;
  backend::Buffer main_norm_, norm_, markov_embed_, markov_head_, mean_pre_;
  // The draft's base logits [rows, vocab slice] (rows position-major), the Markov rows
  // [blocks, rank], biased logits [blocks, vocab slice] and argmax pairs [blocks, 2].
  backend::Buffer base_logits_, markov_rows_, markov_bias_, pairs_;
  std::unique_ptr<dsv4::Moe> moe_;
  std::vector<int> group_in_;
  int64_t step_tokens_ = 0;
  std::vector<backend::Buffer> captures_;  // per target layer id [tokens, hidden]
  backend::Buffer main_x_, scratch_;
  backend::Buffer mean_pres_;  // [tokens, N] of 1/N: the step's capture pre
  Workspace draft_ws_;         // the largest draft's rows so far
};

}  // namespace spark::engine::model::dsv41
