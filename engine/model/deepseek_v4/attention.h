// DeepSeek-V4 attention of one layer over a batch, as a sequence of backend ops that read and
// write the per-token state in the paged KV cache (cache_layout.h).
//
// q: wq_a -> q_norm -> wq_b -> per-head unweighted RMSNorm -> RoPE. One shared KV head
// (K = V): wkv -> kv_norm -> RoPE, stored in the token's window field. A query at position p
// sees the window positions (p - W, p], then compressed entries: HCA (every entry
// w < (p + 1) / ratio) or CSA (the lightning indexer's top-k among those), plus a per-head sink
// logit. The output's rope channels are rotated back, then the grouped low-rank projection
// wo_a (per group) -> wo_b. Compressed entries are produced when a token closes a window
// (DeepseekOps::Compress; for CSA over the previous window's first series and this window's
// second series); the lightning indexer pools its own keys the same way at index_head_dim.
// Which entries each query may see and which slots each entry pools are host integers of the
// step (step_plan.h); everything else stays in backend memory.
// Under tensor parallelism the rank computes its heads and output groups only (weights.h), and
// the output is its partial sum of wo_b, to be all-reduced; the cache state is replicated.
// Thread-safety: one call at a time per object; the object is read-only.
#pragma once

#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/deepseek_v4/step_plan.h"
#include "engine/model/deepseek_v4/workspace.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv4 {

class Attention {
 public:
  Attention(const core::ModelConfig& config, const BackendWeights& weights,
            const CacheLayout& layout, backend::Backend& backend, backend::DeepseekOps& ops);

  // ws.block_out = attention of `layer` for ws.block_in (attn_norm applied). Writes the tokens'
  // state into `cache` first. The batch must be validated and `plan` made from it.
  void Forward(int layer, const ForwardBatch& batch, const StepPlan& plan, PagedKvCache& cache,
               Workspace& ws) const;

 private:
  struct Step;
  struct Compressor;

  void Queries(const Step& s) const;
  void StoreWindow(const Step& s) const;
  void StoreCompressed(const Step& s) const;
  void Compress(const Step& s, const Compressor& c) const;
  void Attend(const Step& s) const;

  const core::ModelConfig& c_;
  const BackendWeights& w_;
  const CacheLayout& layout_;
  backend::Backend& backend_;
  backend::DeepseekOps& ops_;
  std::vector<int> group_in_;  // input columns of each local output group
};

}  // namespace spark::engine::model::dsv4
