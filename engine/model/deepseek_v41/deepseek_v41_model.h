// DeepseekV41Model: the DeepSeek-V4.1 forward pass over backend ops (Backend and DeepseekOps).
//
// Embedding -> N residual streams; per layer: Engram (at engram_layer_ids, engram.h); the mHC
// attention site computes pre / post / comb from the streams, but the block input is collapsed
// with the *previous* site's pre (a one-hot on stream 0 before layer 0) -> attn_norm ->
// attention (attention.h) -> mHC post; the FFN site likewise collapses with the attention
// site's pre -> ffn_norm -> MoE (dsv4::Moe: router bias on every layer, gate_temp) -> mHC post.
// After the last layer the streams collapse with the last FFN site's pre -> norm -> lm_head
// (V4.1 has no hc_head). The model only orchestrates: weights and activations live in backend
// memory, the host passes ids, positions, slots, block tables, the step's entry lists
// (step_plan.h) and the Engram rows; only the logits are downloaded. All per-sequence state is
// per token in the paged KV cache (cache_layout.h).
// Tensor parallelism as V4 (dsv4::PlanShard): vocabulary-parallel embedding (all-reduce),
// attention and MoE each end in one all-reduce of partial sums, logits all-gathered; mHC,
// compressors, indexer, candidate blocks, router and Engram are computed identically on every
// rank.
// Thread-safety: one thread at a time (see Model).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/backend/deepseek_ops.h"
#include "engine/model/deepseek_v4/moe.h"
#include "engine/model/deepseek_v41/attention.h"
#include "engine/model/deepseek_v41/backend_weights.h"
#include "engine/model/deepseek_v41/cache_layout.h"
#include "engine/model/deepseek_v41/dspark.h"
#include "engine/model/deepseek_v41/engram.h"
#include "engine/model/deepseek_v41/engram_hash.h"
#include "engine/model/deepseek_v41/step_plan.h"
#include "engine/model/deepseek_v41/weights.h"
#include "engine/model/deepseek_v41/workspace.h"
#include "engine/model/model.h"

namespace spark::engine::model::dsv41 {

class DeepseekV41Model : public Model {
 public:
  // Uploads `weights` into `backend`; `source` keeps the Engram tables mapped and `token_map`
  // maps token ids to Engram's compressed ids (empty without Engram). A backend without
  // DeepseekOps, or one that cannot hold the weights, leaves the model unusable: Forward then
  // returns FailedPrecondition or ResourceExhausted.
  DeepseekV41Model(core::ModelConfig config, std::unique_ptr<dsv4::TensorSource> source,
                   Weights weights, std::unique_ptr<EngramHashing> hashing,
                   std::vector<int32_t> token_map, backend::Backend& backend,
                   comm::Communicator* comm, std::optional<DraftWeights> draft = std::nullopt);

  const core::ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override;
  // Every piece of decode state (compressor inputs, shared compressed entries, indexer keys,
  // Engram's n-gram history) lives at its token's KV slot and the candidate blocks and top-k
  // are recomputed each step (cache_layout.h), so shortening a sequence drops what rejected
  // drafts wrote: drafts may be verified.
  std::string WhyNoSpeculation() const override { return ""; }
  // DSpark (dspark.h), when loaded with its draft weights.
  bool has_draft_model() const override { return dspark_ != nullptr; }
  Status DraftTokens(std::span<const DraftBlock> blocks, PagedKvCache& cache,
                     std::vector<std::vector<int32_t>>* drafts) override;
  // Model::Forward's errors, plus InvalidArgument for a position that is not its sequence's
  // context_len - query_len + i or a token outside the Engram token map.
  Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                 std::vector<float>* logits) override;

 private:
  Status Check(const ForwardBatch& batch, const PagedKvCache& cache) const;
  Status AllReduce(backend::Buffer& data, int64_t count);
  Status Layer(int layer, const ForwardBatch& batch, const StepPlan& plan, PagedKvCache& cache,
               Workspace& ws);
  // Final collapse and norm of the logit rows into ws.block_in; returns their count.
  int64_t Head(const ForwardBatch& batch, Workspace& ws);
  Status Logits(int64_t rows, Workspace& ws, std::vector<float>* logits);

  core::ModelConfig config_;
  std::unique_ptr<dsv4::TensorSource> source_;  // maps the Engram tables
  std::unique_ptr<EngramHashing> hashing_;
  backend::Backend& backend_;
  backend::DeepseekOps* ops_;  // null when the backend has none
  comm::Communicator* comm_;   // null on one rank
  CacheLayout layout_;
  Status ready_;  // the constructor's error, returned by Forward
  BackendWeights w_;
  std::unique_ptr<Attention> attention_;
  std::unique_ptr<dsv4::Moe> moe_;
  std::unique_ptr<Engram> engram_;
  backend::Buffer stream0_;  // [N]: one-hot on stream 0, the pre of the site before layer 0
  std::unique_ptr<DSpark> dspark_;  // null without draft weights
};

}  // namespace spark::engine::model::dsv41
