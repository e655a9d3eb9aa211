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
#include "engine/runtime/drafter.h"
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
  // Prompt tokens per step of the sequences that score their prompts (prompt_logprobs), all
  // together: each brings back a whole logits row, so with chunked prefill a step holds at
  // most this many such rows (the memory plan counts them). Default 512.
  int max_scored_tokens = 512;

  Status Validate() const;
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;  // of its own tokens (the drafts come on top)
  // A speculative step: tokens proposed after the sequence's last one, run in the same
  // forward (the plan entry's last draft.size() tokens); blocks are held for them too.
  std::vector<int32_t> draft;
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
  // After a speculative step's verdict on `seq`: its first `accepted` draft tokens were kept
  // (already appended to it) and have KV; blocks held for rejected ones are given back, and
  // blocks that became full of computed tokens enter the prefix cache. The sequence is left as
  // if the rejected drafts had never run.
  void CommitDraft(Sequence* seq, int accepted);
  // Speculative decoding: running sequences that decode get up to `num_tokens` draft tokens
  // from `drafter` (not owned; null: off) when the budget and blocks that evict nothing allow.
  void set_drafter(Drafter* drafter, int num_tokens) {
    drafter_ = drafter;
    num_draft_tokens_ = num_tokens;
  }
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
  // The draft tokens running sequence `seq` may get this step: it decodes; at most budget - 1
  // and what max_tokens / max_model_len leave. 0 without a drafter.
  int DraftRoom(const Sequence& seq, int budget) const;
  // A token-reading drafter's proposal for `seq`, cut to its room and to plain free blocks
  // (none that would evict cached ones).
  std::vector<int32_t> Draft(Sequence& seq, int budget);
  // A model drafter's: holds the blocks its block writes and returns the draft tokens the step
  // reserves for it (0: no draft); ScheduleRunning drafts every held block in one call.
  int HoldDraftBlocks(Sequence& seq, int budget);
  void Preempt(Sequence* seq);
  // Tokens to run for `seq` this step within `budget` (scored prompts: what is left of
  // max_scored_tokens this step, maybe 0).
  int ChunkSize(const Sequence& seq, int budget) const;
  // Whether `seq`'s chunks count against max_scored_tokens.
  bool Scored(const Sequence& seq) const {
    return seq.needs_prompt_logits() && options_.enable_chunked_prefill;
  }
  StepPlan MakePlan(const std::vector<ScheduledSequence>& scheduled);

  const SchedulerOptions options_;
  BlockManager* blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  uint64_t step_ = 0;
  uint64_t num_preemptions_ = 0;
  int scored_left_ = 0;  // scored prompt rows this step may still take
  bool admit_ = true;
  Drafter* drafter_ = nullptr;
  int num_draft_tokens_ = 0;
};

}  // namespace spark::engine::runtime
