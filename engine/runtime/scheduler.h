// Scheduler: continuous batching over a per-step token budget, as in nano-vllm / vLLM v1.
//
// Each step: running sequences first, in admission order — each gets its remaining prompt
// chunk or one decode token, within the budget; when KV blocks run out the newest running
// sequence is preempted (recompute: its blocks are freed and it goes back to the head of the
// waiting queue). Then, if nobody was preempted, waiting sequences are admitted FIFO while the
// budget, max_num_seqs and free blocks allow, taking their cached prefix first. A long prompt is
// split across steps (chunked prefill). The result is a StepPlan for every rank.
// Thread-safety: none; owned by the engine thread. Sequences are owned by the caller.
#pragma once

#include <deque>
#include <vector>

#include "base/status.h"
#include "engine/runtime/block_manager.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/step_plan.h"

namespace spark::engine::runtime {

struct SchedulerOptions {
  // Sequences running at once. Default 64.
  int max_num_seqs = 64;
  // Tokens (prefill + decode) per step. Default 2048.
  int max_num_batched_tokens = 2048;
  // Split prompts longer than the remaining budget across steps. Default on; when off,
  // max_num_batched_tokens must be >= max_model_len.
  bool enable_chunked_prefill = true;
  // Prompt + output tokens per sequence. Default 4096.
  int max_model_len = 4096;

  Status Validate() const;
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;  // In plan order.
  std::vector<Sequence*> preempted;          // Back in the waiting queue.
  std::vector<Sequence*> out_of_memory;      // Can never fit alone: finished with kLength.
  StepPlan plan;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, BlockManager* blocks);

  void Add(Sequence* seq);
  SchedulerOutput Schedule();
  // After the plan ran: advances each scheduled sequence's computed tokens, caches full blocks.
  void Commit(const SchedulerOutput& output);
  // Removes a running or waiting sequence and frees its blocks; marks it finished.
  void Finish(Sequence* seq, FinishReason reason);

  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  // Off: Schedule admits no waiting sequence (running ones go on). Default on.
  void set_admit(bool admit) { admit_ = admit; }
  std::vector<Sequence*> waiting() const { return {waiting_.begin(), waiting_.end()}; }
  // The last running sequence admitted, or nullptr.
  Sequence* newest_running() const { return running_.empty() ? nullptr : running_.back(); }

 private:
  // Schedules running sequences; returns the budget left.
  int ScheduleRunning(int budget, SchedulerOutput* out);
  int AdmitWaiting(int budget, SchedulerOutput* out);
  // Makes room for `n` new tokens of running_[index], preempting from the back. False when
  // running_[index] itself was preempted or finished.
  bool MakeRoom(size_t index, int n, SchedulerOutput* out);
  void Preempt(Sequence* seq);
  StepPlan MakePlan(const std::vector<ScheduledSequence>& scheduled);

  const SchedulerOptions options_;
  BlockManager* blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  uint64_t step_ = 0;
  uint64_t num_preemptions_ = 0;
  bool admit_ = true;
};

}  // namespace spark::engine::runtime
