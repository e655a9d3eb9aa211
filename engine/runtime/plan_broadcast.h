// The step executor shared by all ranks: rank 0's engine runs a BroadcastingModelRunner, which
// sends every StepPlan to the other ranks before running its own forward; every other rank
// sits in RunWorkerLoop, receiving plans and running the same forward, until rank 0 sends a
// shutdown plan. The forwards meet in the model's all-reduces/all-gathers.
// Thread-safety: one thread per rank, as the Communicator.
#pragma once

#include "base/status.h"
#include "comm/communicator.h"
#include "engine/runtime/host_memory.h"
#include "engine/runtime/memory_guard.h"
#include "engine/runtime/model_runner.h"

namespace spark::engine::runtime {

// Rank 0 (root): serialises *plan and broadcasts it. Others: replaces *plan with the one
// received. DataLoss for a malformed plan; communicator errors pass through.
Status BroadcastPlan(comm::Communicator& comm, StepPlan* plan);

class BroadcastingModelRunner : public ModelRunner {
 public:
  BroadcastingModelRunner(comm::Communicator* comm, ModelRunner* local)
      : comm_(comm), local_(local) {}

  int vocab_size() const override { return local_->vocab_size(); }
  DecodeStepCounts decode_steps() const override { return local_->decode_steps(); }
  std::string WhyNoSpeculation() const override { return local_->WhyNoSpeculation(); }
  // The model's draft model runs sharded like the model: the draft plan goes to the workers
  // (RunWorkerLoop runs the same draft), then rank 0 drafts.
  bool has_draft_model() const override { return local_->has_draft_model(); }
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const StepPlan& plan) override;
  Result<std::vector<float>> Run(const StepPlan& plan) override;
  // Tells the workers to leave RunWorkerLoop.
  Status Shutdown();

 private:
  comm::Communicator* comm_;
  ModelRunner* local_;
};

// Runs plans from rank 0 until a shutdown plan. Returns the first error (the rank stops).
// A memory poll plan is answered from `memory` (null: this rank reports nothing, -1).
Status RunWorkerLoop(comm::Communicator& comm, ModelRunner& runner, HostMemory* memory = nullptr);

// Rank 0: sends a memory poll plan and gathers every rank's available memory (each from its
// own node, in MiB); returns the smallest and its rank (ranks that could not read theirs are
// skipped). Unavailable when no rank could read its memory; communicator errors pass through.
Result<GroupMemoryReading> PollGroupMemory(comm::Communicator& comm, HostMemory& memory);

}  // namespace spark::engine::runtime
