// Model: one rank's part of a transformer, loaded from a checkpoint directory, that turns a
// ForwardBatch into logits. The runtime (scheduler, block manager, sampler) talks to models only
// through this interface, so each architecture (Qwen3, Qwen3-MoE, DeepSeek-V4 next) is one
// implementation and each backend (CPU now, CUDA later) serves all of them.
//
// Tensor parallelism: every rank loads only its shards (see tp_shard.h) and calls Forward with the
// same batch; the collectives go through the Communicator. Each rank gets the full logits.
// Thread-safety: a Model is used by one thread (its rank's engine thread).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "comm/communicator.h"
#include "engine/core/model_config.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model {

struct ModelOptions {
  // This rank's place in the tensor-parallel group; {0, 1} = no parallelism.
  TpShard shard;
  // How routed experts are split across ranks (default: inside each expert).
  MoeSharding moe_sharding = MoeSharding::kInsideExperts;
  // Element type of the Linear weight matrices in backend memory, MoE experts included
  // (embedding, norms and router stay fp32). bf16 halves what a decode step streams, fp8 (E4M3,
  // 128 x 128 block scales) quarters it. DeepSeek models read fp8 as "the released types": FP8
  // and FP4 matrices kept as the checkpoint stores them, float ones in bf16
  // (deepseek_v4/matrix.h, WeightTypes).
  backend::DType weight_dtype = backend::DType::kF32;
  // Element type of the KV cache. bf16 halves its memory and what attention reads per step
  // (and lets prefill attention run from bf16 tiles directly); Qwen3 models only.
  backend::DType kv_dtype = backend::DType::kF32;
  // One rank, dense layers (Qwen3): each sublayer's output projection adds into the residual
  // stream itself (Backend::LinearAdd), and the next norm reads the stream alone, so a backend
  // may skip the delta buffer and the add. Off: the op-by-op order tensor parallelism keeps
  // (Linear, all-reduce, AddRmsNorm); the same sums either way, for comparisons.
  bool fuse_residual = true;
  // Loading progress in [0, 1], called on the loading thread as weights are read: bytes read
  // over the checkpoint's tensor bytes / shard.size (this rank's expected share; replicated
  // tensors make it an estimate, so it is capped just below 1: the load is done when LoadModel
  // returns). Default: none.
  std::function<void(double fraction)> on_progress;
  // Where the checkpoint's tokenizer lives when the model needs it to load (DeepSeek-V4.1's
  // Engram derives its compressed token map from it). Default (empty): the model directory.
  std::string tokenizer_dir;
  // Also load the checkpoint's own draft model (DeepSeek-V4.1's DSpark stack, mtp.*) for
  // speculative decoding (Model::DraftTokens). A family without one refuses it at load.
  bool load_draft = false;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const core::ModelConfig& config() const = 0;
  // What this rank's KV cache must hold per token and layer.
  virtual KvCacheSpec kv_cache_spec() const = 0;

  // Runs the batch, writing its K/V into `cache`, and returns logits [batch.num_logit_rows(),
  // vocab_size] in host memory. InvalidArgument for a malformed batch; the communicator's
  // errors (Unavailable, DeadlineExceeded) when a peer rank fails.
  virtual Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                         std::vector<float>* logits) = 0;
  // Greedy decoding: the same forward, returning only the argmax id of each logit row (ties to
  // the lower id). Models that can keep the logits in backend memory (Qwen3) compute it there
  // and move two floats per row; the default goes through Forward.
  virtual Status ForwardArgMax(const ForwardBatch& batch, PagedKvCache& cache,
                               std::vector<int32_t>* ids);
  // Greedy steps that run ahead of the host: LaunchArgMax enqueues a step and returns (on a
  // graph backend inside a graph step, before the GPU has run it: Backend::DownloadLater);
  // TakeArgMax waits for the oldest launched step and returns its ids. With ids_from_last,
  // row r's token is the id the previous LaunchArgMax chose for its row r, read where it was
  // computed (batch.token_ids must still hold valid ids; they are not read), so a sequence
  // continues without the host seeing its last token. At most kMaxLaunched launched and not
  // taken (FailedPrecondition). InvalidArgument for ids_from_last without a launched step
  // before, or with another row count or more than one token per sequence. The default runs
  // ForwardArgMax at once.
  static constexpr size_t kMaxLaunched = backend::Backend::kMaxDownloadsLater;
  virtual Status LaunchArgMax(const ForwardBatch& batch, PagedKvCache& cache, bool ids_from_last);
  virtual Status TakeArgMax(std::vector<int32_t>* ids);
  // Why a decode step of this model may not run as a backend graph (Backend::BeginDecodeGraph),
  // or "" when it may: a graph step has no host read-backs, and collectives only through a
  // communicator whose collectives may be captured (Communicator::collectives_in_graphs).
  virtual std::string WhyNoDecodeGraphs() const {
    return "this model family has no graph-safe decode step";
  }
  bool decode_graphs_ok() const { return WhyNoDecodeGraphs().empty(); }
  // Why this model may not run speculative steps (runtime/drafter.h), or "" when it may: a
  // verify step writes draft tokens that may be rejected, so every piece of state they touch
  // must be dropped by shortening the sequence (the paged KV cache's slots past its end are
  // rewritten before they are read). A model with state beyond the paged cache says why not.
  virtual std::string WhyNoSpeculation() const {
    return "this model family keeps state beyond the paged KV cache that has no rollback yet";
  }
  // The model's own drafter (loaded with ModelOptions::load_draft): drafts[k] holds
  // blocks[k].count tokens that may follow blocks[k].anchor (forward_batch.h DraftBlock), all
  // blocks in one forward. Unimplemented without a draft model.
  virtual bool has_draft_model() const { return false; }
  virtual Status DraftTokens(std::span<const DraftBlock> blocks, PagedKvCache& cache,
                             std::vector<std::vector<int32_t>>* drafts);

 protected:
  // LaunchArgMax's checks: at most kMaxLaunched steps, and for ids_from_last one token per
  // sequence and the previous launched step's row count.
  Status CheckLaunch(const ForwardBatch& batch, bool ids_from_last) const;

  std::deque<int64_t> launched_rows_;  // rows of each launched step not yet taken
  int64_t last_launched_rows_ = -1;    // rows of the last launched step (-1: none)

 private:
  std::deque<std::vector<int32_t>> launched_ids_;  // the default LaunchArgMax's results
  std::vector<int32_t> last_ids_;
};

// Reads config.json and this rank's shards from `dir` and returns the model for its
// model_type (the family table, model_family.h). `comm` may be null only when
// options.shard.size == 1; `backend` and `comm` must outlive the model. NotFound/DataLoss/
// InvalidArgument from the checkpoint (file and tensor named), Unimplemented for a model_type no
// family reads or when the family does not run on `backend`, InvalidArgument when it keeps other
// element types than options asks (CheckSupported names the ones it supports).
Result<std::unique_ptr<Model>> LoadModel(const std::string& dir, backend::Backend& backend,
                                         comm::Communicator* comm, const ModelOptions& options);

}  // namespace spark::engine::model
