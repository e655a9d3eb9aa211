// Engine: the step loop of rank 0. Requests come in with AddRequest; each Step() asks the
// scheduler for a StepPlan, runs it through the ModelRunner, samples one token for every
// sequence whose logits came back, applies stop tokens and max_tokens, and returns the new
// tokens. Stop strings are matched by the caller on detokenized text (stop_strings.h), who then
// calls FinishRequest. Finished sequences are dropped after the step that reports them.
// Thread-safety: none; one thread drives the engine (the server queues requests to it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/runtime/block_manager.h"
#include "engine/runtime/memory_guard.h"
#include "engine/runtime/constraint_masks.h"
#include "engine/runtime/drafter.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/sequence.h"

namespace spark::engine::runtime {

struct EngineOptions {
  SchedulerOptions scheduler;
  BlockManagerOptions blocks;
  // The model's end-of-sequence token; -1 = none.
  int32_t eos_token_id = -1;
  // Seeds requests that bring no seed (each gets engine_seed + its id).
  uint64_t seed = 0;
  // Steps whose every sampled sequence is plain greedy (temperature 0, no penalties, no
  // logprobs) go out as kRunArgMax plans: the model picks the ids where the logits are (on the
  // GPU) instead of returning whole rows. Only for runners that answer such plans.
  bool argmax_plans = false;
  // The steady-state memory guard (memory_guard.h), consulted before every step: admission
  // waits while it says no-admit, and waiting requests and the newest running one are failed
  // (Unavailable) while it sheds. Not owned; null: no guard.
  MemoryGuard* memory_guard = nullptr;
  // Threads that compute structured-output masks while the forward runs (constraint_masks.h);
  // started with the first constrained request. Default 4.
  int constraint_threads = 4;
  // Speculative decoding (drafter.h): off by default. Create refuses a method it does not run
  // and a runner that cannot verify drafts (ModelRunner::WhyNoSpeculation).
  SpeculativeOptions speculative;
};

// One new token of one sequence, or the news that it finished without one.
struct TokenOutput {
  uint64_t seq_id = 0;
  bool has_token = false;
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // Set when the engine ended the request itself (the memory guard shed it): Unavailable.
  Status error;
  // With finished: the request's queue, schedule and token times (metrics).
  RequestTimes times;
  // With the first output of a request that scores its prompt (prompt_logprobs): the scores of
  // prompt tokens 1..n-1 (Sequence::prompt_logprobs).
  std::vector<SampleResult> prompt_logprobs;
};

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  float kv_usage = 0.0f;
  uint64_t prefix_queries = 0;
  uint64_t prefix_hits = 0;
  uint64_t num_preemptions = 0;
  uint64_t num_steps = 0;
  uint64_t prompt_tokens_computed = 0;  // Prefill tokens actually run (cache hits excluded).
  DecodeStepCounts decode_steps;         // the runner's graph and eager decode steps
  // Speculative decoding (vLLM's spec_decode counters): sequence-steps that carried drafts,
  // draft tokens proposed, draft tokens accepted. Mean accepted length a step: 1 +
  // spec_accepted_tokens / spec_drafts.
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  // Accepted draft tokens by their place in the draft (vLLM's
  // spec_decode_num_accepted_tokens_per_pos): one entry per position up to
  // num_speculative_tokens; they sum to spec_accepted_tokens.
  std::vector<uint64_t> spec_accepted_per_pos;
};

class Engine {
 public:
  // InvalidArgument for inconsistent options.
  static Result<std::unique_ptr<Engine>> Create(const EngineOptions& options, ModelRunner* runner);

  // InvalidArgument (bad params, empty or too long prompt, token out of vocabulary),
  // AlreadyExists (id in use), ResourceExhausted (prompt larger than the whole KV cache).
  Status AddRequest(uint64_t id, std::vector<int32_t> prompt, const SamplingParams& params);
  // Ends a request now (stop string matched, client gone). NotFound for an unknown id.
  Status FinishRequest(uint64_t id, FinishReason reason);
  // One scheduling + forward + sampling round. Errors come from the model runner.
  Result<std::vector<TokenOutput>> Step();

  bool HasUnfinished() const { return scheduler_.HasWork(); }
  // The last Step ran nothing and finished nothing while requests wait (the memory guard holds
  // admission): the caller may sleep a little before the next Step.
  bool stalled() const { return stalled_; }
  const MemoryGuard* memory_guard() const { return options_.memory_guard; }
  // Lets the memory guard take a reading while nothing runs, so its state (and /metrics) stays
  // current on an idle engine. No-op without a guard.
  void CheckMemory() {
    if (options_.memory_guard != nullptr) options_.memory_guard->Check();
  }
  const Sequence* Find(uint64_t id) const;
  // Drafts from `drafter` (not owned) instead of the engine's own (tests and benchmarks: an
  // oracle or an always-wrong drafter); the engine must have been created with speculative
  // decoding on (its num_speculative_tokens apply).
  void SetDrafter(Drafter* drafter) {
    scheduler_.set_drafter(drafter, options_.speculative.num_speculative_tokens);
  }
  EngineStats stats() const;

 private:
  Engine(const EngineOptions& options, ModelRunner* runner);

  // Whether every sequence that samples this step is plain greedy (see argmax_plans).
  bool AllGreedy(const SchedulerOutput& out) const;
  // Starts the masks of the sequences that sample under an active grammar this step; returns
  // each scheduled entry's mask row (-1: none).
  std::vector<int> StartMasks(const SchedulerOutput& out);
  // Appends a token to every needs_logits sequence: sampled from logits rows, or (argmax plans)
  // the ids the runner picked.
  Status SampleRows(const SchedulerOutput& out, const std::vector<float>& logits,
                    const std::vector<int>& mask_rows, std::vector<TokenOutput>* outputs);
  // One row through logit processing (bias, min_tokens, grammar mask) and the sampler; with a
  // `draft` token (>= 0) its verdict instead (VerifyDraftToken), *accepted set.
  Result<SampleResult> SampleProcessed(Sequence& seq, std::span<const float> row,
                                       std::span<const uint32_t> mask, int32_t draft = -1,
                                       bool* accepted = nullptr);
  // Scores the prompt tokens that the rows of a prompt_logits entry predict (each row gives the
  // next token's log-probability); rows of positions scored before (a recomputed chunk) are
  // skipped.
  void ScorePrompt(Sequence* seq, const StepPlanEntry& entry, const float* rows, size_t vocab);
  // Ends a request that asked for no generated token (max_tokens 0) once its prompt is scored.
  void EndScored(Sequence* seq, std::vector<TokenOutput>* outputs);
  // Appends `s.token` to `seq` (grammar, times, stops) and reports it; true when it finished.
  Result<bool> EmitToken(Sequence* seq, SampleResult s, std::vector<TokenOutput>* outputs);
  // kNone, or why `seq` stops after its last token.
  FinishReason CheckStop(const Sequence& seq) const;
  void DropFinished();
  // The guard's verdict for this step: admission on or off, and while shedding, waiting
  // requests and the newest running one finished with an error in `outputs`.
  void ApplyMemoryGuard(std::vector<TokenOutput>* outputs);
  void Shed(Sequence* seq, const std::string& why, std::vector<TokenOutput>* outputs);

  const EngineOptions options_;
  ModelRunner* runner_;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  uint64_t num_steps_ = 0;
  uint64_t prompt_tokens_computed_ = 0;
  bool stalled_ = false;
  std::unique_ptr<ConstraintMasks> masks_;  // Made with the first constrained request.
  std::unique_ptr<ThreadPool> score_pool_;  // Made with the first scored prompt.
  std::unique_ptr<Drafter> drafter_;         // With options_.speculative enabled.
  std::vector<uint32_t> draft_mask_;         // A grammar's mask at a draft position.
  uint64_t spec_drafts_ = 0, spec_draft_tokens_ = 0, spec_accepted_tokens_ = 0;
  std::vector<uint64_t> spec_accepted_per_pos_;
};

}  // namespace spark::engine::runtime
