// ServerMetrics: the counters and histograms behind GET /metrics, in the Prometheus text format
// (0.0.4) exactly as vLLM's prometheus_client exposition names them, so Grafana dashboards built
// for vLLM work unchanged: every sample carries model_name="<served name>" and engine="0";
// counters are exposed as `<name>_total` (HELP and TYPE lines too); histograms as
// `_bucket{le=...}`, `_sum` and `_count` with vLLM's bucket bounds; numbers and `le` values are
// written as Python writes floats ("1.0", "0.25", "+Inf"). Gauges (running, waiting, KV usage)
// and the prefix-cache and preemption counters come from the GenerationService's stats at render
// time; the request-phase histograms from the engine thread's timestamps of each sequence.
// Thread-safety: all methods may be called from any thread (one internal mutex).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/server/generation_service.h"

namespace spark::engine::server {

// A cumulative Prometheus histogram with fixed upper bounds (+Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends the _bucket/_sum/_count lines of `name` with `labels` (`model_name="x"`).
  void Render(const std::string& name, const std::string& labels, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // Per bucket (not cumulative); the last is +Inf.
  double sum_ = 0;
  uint64_t count_ = 0;
};

// A number as Python's repr(float) writes it ("1.0", "0.1", "2.5e-05", "+Inf", "NaN").
std::string PrometheusNumber(double v);
// A label value escaped for the text format (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);
// vLLM's 1-2-5 bounds up to max_value: 1, 2, 5, 10, 20, 50, ...
std::vector<double> OneTwoFiveBuckets(int max_value);

// One finished request, as vLLM records it.
struct FinishedRequest {
  double e2e_seconds = 0;
  std::string finish_reason;  // "stop", "length", "tool_calls", "abort" (tool_calls counts as stop)
  int prompt_tokens = 0;
  int generation_tokens = 0;  // over all choices
  int n = 1;
  int max_tokens = 0;  // the request's max_tokens; 0 when it gave none
};

// Where one sequence's time went, measured on the engine thread (runtime::RequestTimes).
struct RequestPhases {
  double queue_seconds = 0;    // queued -> first scheduled
  double prefill_seconds = 0;  // first scheduled -> first token
  double decode_seconds = 0;   // first token -> last token
  double inference_seconds = 0;  // first scheduled -> last token
};

class ServerMetrics {
 public:
  // `max_model_len` bounds the token-count histograms, as in vLLM.
  ServerMetrics(std::string model_name, int max_model_len);

  void AddPromptTokens(int n);
  void AddGenerationTokens(int n);
  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  // request_success_total{finished_reason}, e2e latency and the per-request histograms.
  void ObserveRequestDone(const FinishedRequest& request);
  void CountRejected();  // 429s
  // vllm:request_{queue,prefill,decode,inference}_time_seconds.
  void ObserveRequestPhases(const RequestPhases& phases);

  // The whole exposition text.
  std::string Render(const ServiceStats& stats) const;

 private:
  const std::string labels_;
  mutable std::mutex mu_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generation_tokens_ = 0;
  uint64_t rejected_ = 0;
  std::map<std::string, uint64_t> success_;  // finished_reason -> count
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram prompt_len_;
  Histogram generation_len_;
  Histogram params_n_;
  Histogram params_max_tokens_;
  Histogram queue_time_;
  Histogram prefill_time_;
  Histogram decode_time_;
  Histogram inference_time_;
};

}  // namespace spark::engine::server
