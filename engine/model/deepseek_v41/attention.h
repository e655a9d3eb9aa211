// DeepSeek-V4.1 attention of one layer over a batch (CED / CSA2), as backend ops that read and
// write the per-token state in the paged KV cache (cache_layout.h).
//
// q: wq_a -> q_norm -> wq_b -> RoPE (no per-head norm). One shared KV head (K = V): wkv ->
// kv_norm -> RoPE -> FP8 fake quantisation, stored as the token's window key. Layers with
// compress ratio 0 attend their window only. The others also attend the shared compressed KV of
// their group's KV source (the latest kv_source_layer_ids entry at or before them), restricted to
// the top-k chosen by their group's latest index source:
//   - a KV source pools each closed group of `ratio` tokens (softmax gate per channel; at ratio 1
//     each token is its own entry, no gate) into a latent, RMS-normalised; the indexer key is
//     k_norm(wk latent), roped at the group's first position, FP4 (UE8M0 per 32); the entry is
//     the roped latent, FP4 (E4M3 scales per 16). Entry j is visible at p iff j < (p+1)/ratio.
//   - an index source scores its queries (wq_b_idx qr, roped, FP4) against the group's keys;
//     the candidate source publishes the mask of its top candidate blocks (newest pinned), which
//     every later index source applies before its own top-k.
// The output's rope channels are rotated back, then the grouped projection wo_a -> wo_b.
// Under tensor parallelism a rank computes its heads and output groups (partial sums of wo_b, to
// be all-reduced); compressors, indexer and cache state are replicated, so the selections agree.
// Thread-safety: one call at a time; the object is read-only.
#pragma once

#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v41/backend_weights.h"
#include "engine/model/deepseek_v41/cache_layout.h"
#include "engine/model/deepseek_v41/step_plan.h"
#include "engine/model/deepseek_v41/workspace.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv41 {

class Attention {
 public:
  Attention(const core::ModelConfig& config, const BackendWeights& weights,
            const CacheLayout& layout, backend::Backend& backend, backend::DeepseekOps& ops);

  // ws.block_out = attention of `layer` for ws.block_in (attn_norm applied); writes the tokens'
  // state into `cache` first. ws.selected carries an index source's top-k to the later layers of
  // its group, so layers must run in order. The batch must be validated and `plan` made from it.
  void Forward(int layer, const ForwardBatch& batch, const StepPlan& plan, PagedKvCache& cache,
               Workspace& ws) const;

 private:
  struct Step;

  void Queries(const Step& s) const;
  void StoreWindow(const Step& s) const;
  void StoreEntries(const Step& s) const;
  void PublishEntries(const Step& s, int64_t count, std::span<const int32_t> positions,
                      std::span<const int64_t> slots) const;
  void Index(const Step& s) const;
  void Attend(const Step& s) const;

  const core::ModelConfig& c_;
  const BackendWeights& w_;
  const CacheLayout& layout_;
  backend::Backend& backend_;
  backend::DeepseekOps& ops_;
  std::vector<int> group_in_;  // input columns of each local output group
};

}  // namespace spark::engine::model::dsv41
