// ServerMetrics: the counters and histograms behind GET /metrics, rendered in the Prometheus
// text format under vLLM's metric names (vllm:...) with a model_name label, so dashboards built
// for vLLM work unchanged. Gauges (running, waiting, KV usage) and the prefix-cache counters
// come from the GenerationService's stats at render time.
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

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  void AddPromptTokens(int n);
  void AddGenerationTokens(int n);
  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  // One finished request: e2e latency and request_success{finished_reason}.
  void ObserveRequestDone(double seconds, const std::string& finish_reason);
  void CountRejected();  // 429s

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
};

}  // namespace spark::engine::server
