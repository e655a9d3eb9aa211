// DeepseekV4Model: the DeepSeek-V4 forward pass over backend ops (Backend and DeepseekOps).
//
// Embedding -> N residual streams; per layer: mHC pre -> attn_norm -> attention (sliding, CSA
// or HCA; attention.h) -> mHC post; mHC pre -> ffn_norm -> MoE (moe.h) -> mHC post; then
// hc_head -> norm -> lm_head. The model only orchestrates: weights and activations live in
// backend memory (backend_weights.h, workspace.h), the host passes token ids, positions, slots,
// block tables and the step's entry lists (step_plan.h), and only the logits are downloaded.
// All per-sequence decode state is kept per token in the paged KV cache (cache_layout.h), so
// continuous batching, chunked prefill split anywhere and decode work without any other state.
// Tensor parallelism (weights.h says what each rank holds): the embedding is vocabulary-parallel
// (all-reduce), attention and MoE each end in one all-reduce of partial sums, and the logits are
// all-gathered, so every rank computes identical routing and top-k.
// Thread-safety: one thread at a time (see Model).
#pragma once

#include <string>
#include <memory>

#include "engine/backend/deepseek_ops.h"
#include "engine/model/deepseek_v4/attention.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/deepseek_v4/moe.h"
#include "engine/model/deepseek_v4/step_plan.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/deepseek_v4/workspace.h"
#include "engine/model/model.h"

namespace spark::engine::model::dsv4 {

class DeepseekV4Model : public Model {
 public:
  // Uploads `weights` into `backend` (the host copy is freed). A backend without DeepseekOps, or
  // one that cannot hold the weights, leaves the model unusable: Forward then returns
  // FailedPrecondition or ResourceExhausted.
  DeepseekV4Model(core::ModelConfig config, Weights weights, backend::Backend& backend,
                  comm::Communicator* comm);

  const core::ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override;
  // Every piece of decode state (compressor and indexer inputs, compressed entries, indexer
  // keys) lives at its token's KV slot and the top-k is recomputed each step (cache_layout.h),
  // so shortening a sequence drops what rejected drafts wrote: drafts may be verified.
  std::string WhyNoSpeculation() const override { return ""; }
  // Model::Forward's errors, plus InvalidArgument for a position that is not its sequence's
  // context_len - query_len + i, and the constructor's error.
  Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                 std::vector<float>* logits) override;

 private:
  Status Check(const ForwardBatch& batch, const PagedKvCache& cache) const;
  Status AllReduce(backend::Buffer& data, int64_t count);
  // One mHC site before a block: ws.pre/post/comb from the streams, ws.block_in = the normed
  // block input.
  void HyperPre(const HcBuffers& hc, const backend::Buffer& norm, Workspace& ws);
  // hc_head and the final norm of the logit rows into ws.block_in; returns their count.
  int64_t Head(const ForwardBatch& batch, Workspace& ws);
  Status Logits(int64_t rows, Workspace& ws, std::vector<float>* logits);

  core::ModelConfig config_;
  backend::Backend& backend_;
  backend::DeepseekOps* ops_;  // null when the backend has none
  comm::Communicator* comm_;   // null on one rank
  CacheLayout layout_;
  Status ready_;  // the constructor's error, returned by Forward
  BackendWeights w_;
  std::unique_ptr<Attention> attention_;  // null unless ready_
  std::unique_ptr<Moe> moe_;
};

}  // namespace spark::engine::model::dsv4
