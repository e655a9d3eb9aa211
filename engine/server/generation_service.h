// GenerationService: the only way the HTTP server reaches a model. A request is a prompt of
// token ids plus sampling params; the service streams back one event per generated token and a
// final event. The real implementation (engine_service.h) wraps engine/runtime's Engine on its
// own thread; tests and benchmarks substitute deterministic fakes.
// Thread-safety: every method may be called from any thread. Event callbacks run on the
// service's own thread, one at a time per service, and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/status.h"
#include "engine/runtime/memory_guard.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/sampling_params.h"
#include "engine/runtime/sequence.h"

namespace spark::engine::server {

struct GenerationRequest {
  uint64_t id = 0;  // Unique among live requests; chosen by the caller.
  std::vector<int32_t> prompt;
  runtime::SamplingParams params;
};

// One generated token, or the end of a request (finished), or both.
struct GenerationEvent {
  uint64_t id = 0;
  bool has_token = false;
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<runtime::TokenLogprob> top_logprobs;
  // Prompt tokens served from the prefix cache; set on the first event of a request.
  int cached_prompt_tokens = 0;
  bool finished = false;
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
  // Not OK when the request failed (model error, dead rank); then finished is true.
  Status error;
  // With a finished event of a request the engine ran to its end: when it was queued, first
  // scheduled, and got its first and last token (vLLM's request-time histograms).
  std::optional<runtime::RequestTimes> times;
  // The scores of prompt tokens 1..n-1 when the request asked (SamplingParams::prompt_logprobs);
  // on the first event of a request.
  std::vector<runtime::SampleResult> prompt_logprobs;
};

// Called for each event of one request; after the event with finished == true, never again.
using EventCallback = std::function<void(const GenerationEvent&)>;

struct ServiceStats {
  int num_running = 0;
  int num_waiting = 0;
  float kv_usage = 0.0f;        // Fraction of KV blocks held by requests.
  uint64_t prefix_queries = 0;  // Prompt tokens looked up in the prefix cache.
  uint64_t prefix_hits = 0;     // ... and found.
  runtime::DecodeStepCounts decode_steps;  // replayed as graphs, or eager by reason
  // Progress: engine steps run and prompt tokens prefilled (a long prefill advances both every
  // chunk; /ready tells a busy engine from a stalled one by them).
  uint64_t num_steps = 0;
  uint64_t prompt_tokens_computed = 0;
  double step_seconds = -1;  // how long the step running now has run; -1: none is running
  std::optional<runtime::MemoryGuardStatus> memory_guard;  // when the engine has a guard
  uint64_t num_preemptions = 0;  // Sequences whose KV was dropped to make room (recomputed).
  // Speculative decoding (runtime::EngineStats): sequence-steps with drafts, draft tokens
  // proposed and accepted.
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_pos;  // by place in the draft
};

class GenerationService {
 public:
  virtual ~GenerationService() = default;

  // Queues a request. Errors come back through the callback (a finished event with `error`),
  // except Unavailable when the service is shut down; the callback is then never called.
  virtual Status Submit(GenerationRequest request, EventCallback callback) = 0;
  // Ends a request early and frees its KV blocks; a finished event (kAbort) follows unless the
  // request had already finished. Unknown ids are ignored.
  virtual void Cancel(uint64_t id) = 0;
  virtual ServiceStats Stats() const = 0;
  // Prompt plus generated tokens of one request, at most.
  virtual int max_model_len() const = 0;
  // Vocabulary size: token ids in prompts must be below it.
  virtual int vocab_size() const = 0;
  // Not Ok once the model can no longer run (a tensor-parallel rank died); /ready reports it
  // at once. Default: always Ok.
  virtual Status broken() const { return Status::Ok(); }
};

}  // namespace spark::engine::server
