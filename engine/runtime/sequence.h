// Sequence: one request as the scheduler and block manager see it — prompt and generated token
// ids in one array, how many of them already have KV in the cache, the block table that maps
// its token positions to KV blocks, its sampling params and its own RNG.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/runtime/constrained_output.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/sampling_params.h"

namespace spark::engine::runtime {

enum class SequenceStatus { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort };

// "stop", "length", "abort" (OpenAI's finish_reason), "" for kNone.
const char* FinishReasonName(FinishReason reason);

// A request's life as vLLM's request-time histograms measure it, on the engine thread: queued
// (AddRequest), first scheduled, first and latest token. Unset points are the clock's epoch.
struct RequestTimes {
  using Clock = std::chrono::steady_clock;
  Clock::time_point queued;
  Clock::time_point scheduled;
  Clock::time_point first_token;
  Clock::time_point last_token;
};

class Sequence {
 public:
  // `rng_seed` seeds the request's RNG: params.seed when set, otherwise an engine-chosen seed.
  Sequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params, uint64_t rng_seed);

  uint64_t id() const { return id_; }
  const SamplingParams& params() const { return params_; }
  std::mt19937_64& rng() { return rng_; }

  SequenceStatus status() const { return status_; }
  void set_status(SequenceStatus status) { status_ = status; }
  FinishReason finish_reason() const { return finish_reason_; }
  void Finish(FinishReason reason);

  int num_tokens() const { return static_cast<int>(token_ids_.size()); }
  int prompt_len() const { return prompt_len_; }
  int num_output_tokens() const { return num_tokens() - prompt_len_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  std::span<const int32_t> prompt_ids() const { return {token_ids_.data(), size_t(prompt_len_)}; }
  std::span<const int32_t> output_ids() const {
    return {token_ids_.data() + prompt_len_, size_t(num_output_tokens())};
  }
  int32_t last_token() const { return token_ids_.back(); }
  void AppendToken(int32_t token) { token_ids_.push_back(token); }

  // Tokens at positions [0, num_computed_tokens) have KV in the cache.
  int num_computed_tokens() const { return num_computed_tokens_; }
  void set_num_computed_tokens(int n) { num_computed_tokens_ = n; }
  // Of those, how many came from the prefix cache at the last admission (metrics, tests).
  int num_cached_tokens() const { return num_cached_tokens_; }
  void set_num_cached_tokens(int n) { num_cached_tokens_ = n; }
  int num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens_; }

  std::vector<int32_t>& block_table() { return block_table_; }
  const std::vector<int32_t>& block_table() const { return block_table_; }

  // Times this sequence was preempted (its KV dropped and recomputed later).
  int num_preemptions() const { return num_preemptions_; }
  void CountPreemption() { ++num_preemptions_; }

  // Structured output: the grammar state, null without one.
  ConstrainedOutput* constrained() { return constrained_.get(); }
  const ConstrainedOutput* constrained() const { return constrained_.get(); }
  void set_constrained(std::unique_ptr<ConstrainedOutput> c) { constrained_ = std::move(c); }

  RequestTimes& times() { return times_; }
  const RequestTimes& times() const { return times_; }

  // Prompt scoring (params().prompt_logprobs): the scores of prompt tokens 1..k so far, in
  // order (token k's from the logits of position k - 1). Complete at prompt_len() - 1 entries.
  std::vector<SampleResult>& prompt_logprobs() { return prompt_logprobs_; }
  // Whether positions of the prompt still need their logits rows (scoring not complete).
  bool needs_prompt_logits() const {
    return params_.scores_prompt() &&
           static_cast<int>(prompt_logprobs_.size()) < prompt_len_ - 1;
  }

 private:
  const uint64_t id_;
  const SamplingParams params_;
  std::mt19937_64 rng_;
  SequenceStatus status_ = SequenceStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  std::vector<int32_t> token_ids_;
  const int prompt_len_;
  int num_computed_tokens_ = 0;
  int num_cached_tokens_ = 0;
  int num_preemptions_ = 0;
  std::vector<int32_t> block_table_;
  std::unique_ptr<ConstrainedOutput> constrained_;
  RequestTimes times_;
  std::vector<SampleResult> prompt_logprobs_;
};

}  // namespace spark::engine::runtime
