// ModelRunner: what the engine loop calls to run one StepPlan through the model. The real one
// (engine/model + a backend) writes each entry's tokens into the KV blocks of its block table
// and returns logits; tests substitute fakes. With tensor parallelism, rank 0's runner
// broadcasts the plan first (plan_broadcast.h) and every rank runs the same forward.
// Thread-safety: called from the engine thread only.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/runtime/step_plan.h"

namespace spark::engine::runtime {

// How a runner ran its decode steps (one token per sequence): replaying captured graphs, or
// eagerly, counted by why (for the log and /metrics).
struct DecodeStepCounts {
  uint64_t graph = 0;
  std::map<std::string, uint64_t> eager;  // reason -> steps
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Decode steps so far (runners without graphs: none counted).
  virtual DecodeStepCounts decode_steps() const { return {}; }

  virtual int vocab_size() const = 0;

  // Why this runner cannot run plans with draft tokens (StepPlanEntry::num_draft_tokens), or ""
  // when it can: it must return a logits row for each draft, and the model must keep no state
  // that rejected drafts would leave behind.
  virtual std::string WhyNoSpeculation() const { return "this model runner runs no draft tokens"; }

  // The model's own drafter (Model::DraftTokens) over a kDraft plan (step_plan.h): for each
  // entry, num_draft_tokens tokens that may follow its one token (the anchor, at start_pos,
  // which no step has run yet), its block table covering positions up to start_pos +
  // num_draft_tokens - 1; every entry's block in one forward, the drafts in entry order.
  // Called between steps (on rank 0 by its engine, on workers by RunWorkerLoop for a draft
  // plan). Unimplemented without one.
  virtual bool has_draft_model() const { return false; }
  virtual Result<std::vector<std::vector<int32_t>>> DraftTokens(const StepPlan& plan) {
    (void)plan;
    return UnimplementedError("this model runner has no draft model");
  }

  // Runs the plan. Returns plan.num_logits_rows() rows of vocab_size() logits, row-major, in the
  // order of the entries that have needs_logits; for a kRunArgMax plan (only sent to runners
  // whose engine has EngineOptions::argmax_plans) one value per such row instead, the argmax
  // id (exact in a float). On ranks other than 0 the rows may be empty.
  virtual Result<std::vector<float>> Run(const StepPlan& plan) = 0;
};

}  // namespace spark::engine::runtime
