// ModelStepRunner: the runtime::ModelRunner over one rank's Model. It owns the rank's paged KV
// cache, sized from the engine's block count (the runtime BlockManager hands out the block ids
// that StepPlans carry), turns each StepPlan into a ForwardBatch and returns the logits rows of
// the entries that need them. Every rank of a tensor-parallel group runs the same plans; the
// model all-gathers the vocab-parallel logits, so rank 0 returns full-vocabulary rows and the
// other ranks return none (nobody samples there).
// `spark-engine generate` and (through engine/cli/rank_launch.h) `serve` use this runner.
// Thread-safety: none; called from the rank's engine thread only, as the Model.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/step_plan.h"

namespace spark::engine::model {

class ModelStepRunner : public runtime::ModelRunner {
 public:
  // Allocates a KV cache of num_blocks x block_size tokens on `backend` for `model` (both must
  // outlive the runner). `return_logits`: false on ranks that never sample (TP ranks > 0).
  // InvalidArgument for non-positive sizes; ResourceExhausted when the cache does not fit.
  // `decode_graphs`: run greedy decode steps of at most kMaxGraphBatch sequences as backend
  // graphs (Backend::BeginDecodeGraph) when the model allows it, keyed by batch size and a
  // power-of-two bucket of the longest block table. The first decode step of each batch size
  // runs eagerly: it builds what the graphs must not (RoPE tables, tuned GEMM plans for that
  // many rows). Every decode step that runs eagerly is counted by its reason (decode_steps())
  // and each reason is logged once.
  // `launch_ahead` (with decode_graphs): once a greedy decode step is launched in a graph, and
  // before waiting for it, launch the step that would follow if every sequence goes on (the
  // same sequences, each fed on the device the id this step picks: Model::LaunchArgMax), so the
  // host stages it while the GPU runs this one, and the GPU runs it while the engine samples,
  // checks stops and schedules. The next Run takes its result when its plan is that step, and
  // otherwise drops it (the GPU's work on it is lost; its K/V writes land in slots past each
  // sequence's end, inside blocks the sequence holds, which nothing reads before writing them
  // again). Not launched when a sequence's next position needs a new block.
  static Result<std::unique_ptr<ModelStepRunner>> Create(Model* model, backend::Backend& backend,
                                                         int64_t num_blocks, int block_size,
                                                         bool return_logits = true,
                                                         bool decode_graphs = false,
                                                         bool launch_ahead = true);
  ~ModelStepRunner() override;
  static constexpr int kMaxGraphBatch = 64;

  int vocab_size() const override { return model_->config().vocab_size; }
  runtime::DecodeStepCounts decode_steps() const override { return decode_steps_; }
  std::string WhyNoSpeculation() const override {
    const std::string why = model_->WhyNoSpeculation();
    return why.empty() ? why : model_->config().model_type + ": " + why;
  }

  bool has_draft_model() const override { return model_->has_draft_model(); }
  // InvalidArgument for a plan that is not a draft plan; the model's errors pass through.
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const runtime::StepPlan& plan) override;
  // Runs the plan's entries in one forward (kRunArgMax plans through Model::ForwardArgMax, so
  // only ids leave the backend; the backend's error, if an op met one, fails the step).
  // InvalidArgument for an entry without tokens, a
  // block table too short for its positions or a block id outside the cache (from
  // ForwardBatch::Validate); the model's and communicator's errors pass through.
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override;

  // The ForwardBatch for `plan` (exposed for tests).
  static ForwardBatch MakeBatch(const runtime::StepPlan& plan, int block_size);
  // Steps launched ahead so far, and how many of them the plan after took (for tests and
  // stats).
  int64_t launched_ahead() const { return launched_ahead_; }
  int64_t taken_ahead() const { return taken_ahead_; }

  int64_t num_blocks() const { return cache_.num_blocks(); }
  int block_size() const { return cache_.block_size(); }

 private:
  ModelStepRunner(Model* model, backend::Backend* backend, PagedKvCache cache, bool return_logits,
                  bool decode_graphs, bool launch_ahead)
      : model_(model),
        backend_(backend),
        cache_(std::move(cache)),
        return_logits_(return_logits),
        decode_graphs_(decode_graphs),
        launch_ahead_(launch_ahead && decode_graphs) {}
  // Opens a graph step for `plan` when it is a decode step graphs may take (keys begin with
  // `kind`: a key names one op sequence); true when the backend opened one. A decode step that
  // runs eagerly instead is counted (CountEager) unless `count` is false.
  bool MaybeBeginGraph(const runtime::StepPlan& plan, const char* kind, bool count = true);
  // Counts an eager decode step under `reason`, logging the reason the first time.
  void CountEager(const std::string& reason);
  // A kRunArgMax plan's ids: the step launched ahead when it is this plan, else run here; the
  // step after it is launched before its ids are taken (MaybeLaunchAhead).
  Result<std::vector<int32_t>> RunArgMax(const runtime::StepPlan& plan, const ForwardBatch& batch);
  // Launches the step after `plan` (launched, not taken) when it may (see Create); true if so
  // (its token ids are filled in once plan's are taken).
  bool MaybeLaunchAhead(const runtime::StepPlan& plan);
  // Takes and forgets the step launched ahead, if any.
  Status DropAhead();

  Model* model_;
  backend::Backend* backend_;
  PagedKvCache cache_;
  const bool return_logits_;
  const bool decode_graphs_;
  const bool launch_ahead_;
  std::vector<float> logits_;  // Reused across steps.
  // The entries of the step launched ahead and in flight (empty: none; a plan with entries is
  // never launched empty).
  std::vector<runtime::StepPlanEntry> ahead_entries_;
  int64_t launched_ahead_ = 0, taken_ahead_ = 0;
  std::set<size_t> warmed_batches_;  // batch sizes whose first decode step ran eagerly
  runtime::DecodeStepCounts decode_steps_;
};

}  // namespace spark::engine::model
