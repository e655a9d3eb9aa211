#include "engine/server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spark::engine::server {
namespace {

// vLLM's buckets for these histograms.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                         5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                         60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kNBuckets = {1, 2, 5, 10, 20};

// The label set of every sample; vLLM v1 adds the engine index.
std::string BaseLabels(const std::string& model_name) {
  return "model_name=\"" + EscapeLabelValue(model_name) + "\",engine=\"0\"";
}

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + PrometheusNumber(v) + "\n";
}

void Gauge(std::string& out, const char* name, const char* help, const std::string& labels,
           double v) {
  Header(out, name, "gauge", help);
  Sample(out, name, labels, v);
}

// prometheus_client names a counter's family, HELP and TYPE after its `_total` sample.
void Counter(std::string& out, const std::string& name, const char* help, const std::string& labels,
             uint64_t v) {
  Header(out, name + "_total", "counter", help);
  Sample(out, name + "_total", labels, static_cast<double>(v));
}

void HistogramBlock(std::string& out, const char* name, const char* help, const std::string& labels,
                    const Histogram& h) {
  Header(out, name, "histogram", help);
  h.Render(name, labels, out);
}

// vLLM's finished_reason values.
std::string SuccessReason(const std::string& reason) {
  return reason == "length" || reason == "abort" ? reason : "stop";
}

}  // namespace

std::string PrometheusNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {  // The fewest significant digits that read back exactly.
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 16) return buf;  // Python: 1e+16, 2.5e-05.
  std::snprintf(buf, sizeof buf, "%.*f", std::max(digits - 1 - exponent, 1), v);
  return buf;  // Python: 1.0, 0.075, 2560.0.
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::vector<double> OneTwoFiveBuckets(int max_value) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > max_value) return out;
      out.push_back(m * scale);
    }
  }
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? PrometheusNumber(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " +
           PrometheusNumber(static_cast<double>(cumulative)) + "\n";
  }
  Sample(out, name + "_count", labels, static_cast<double>(count_));
  Sample(out, name + "_sum", labels, sum_);
}

ServerMetrics::ServerMetrics(std::string model_name, int max_model_len)
    : labels_(BaseLabels(model_name)),
      ttft_(kTtftBuckets),
      itl_(kItlBuckets),
      e2e_(kE2eBuckets),
      prompt_len_(OneTwoFiveBuckets(max_model_len)),
      generation_len_(OneTwoFiveBuckets(max_model_len)),
      params_n_(kNBuckets),
      params_max_tokens_(OneTwoFiveBuckets(max_model_len)),
      queue_time_(kE2eBuckets),
      prefill_time_(kE2eBuckets),
      decode_time_(kE2eBuckets),
      inference_time_(kE2eBuckets) {}

void ServerMetrics::AddPromptTokens(int n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += n;
}

void ServerMetrics::AddGenerationTokens(int n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
}

void ServerMetrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.Observe(seconds);
}

void ServerMetrics::ObserveInterTokenLatency(double seconds) {
  std::lock_guard lock(mu_);
  itl_.Observe(seconds);
}

void ServerMetrics::ObserveRequestDone(const FinishedRequest& r) {
  std::lock_guard lock(mu_);
  ++success_[SuccessReason(r.finish_reason)];
  e2e_.Observe(r.e2e_seconds);
  prompt_len_.Observe(r.prompt_tokens);
  generation_len_.Observe(r.generation_tokens);
  params_n_.Observe(r.n);
  if (r.max_tokens > 0) params_max_tokens_.Observe(r.max_tokens);
}

void ServerMetrics::ObserveRequestPhases(const RequestPhases& p) {
  std::lock_guard lock(mu_);
  queue_time_.Observe(p.queue_seconds);
  prefill_time_.Observe(p.prefill_seconds);
  decode_time_.Observe(p.decode_seconds);
  inference_time_.Observe(p.inference_seconds);
}

void ServerMetrics::CountRejected() {
  std::lock_guard lock(mu_);
  ++rejected_;
}

namespace {

// Progress and the memory guard (docs/memory.md): a supervisor tells a busy engine from a stalled
// one by the step and prefill counters, and sees the guard's state and trips.
void RenderProgressAndMemory(std::string& out, const std::string& l, const ServiceStats& stats) {
  Counter(out, "spark:engine_steps", "Engine steps run.", l, stats.num_steps);
  Counter(out, "spark:prefill_tokens", "Prompt tokens run through the model (cache hits excluded).",
          l, stats.prompt_tokens_computed);
  if (!stats.memory_guard) return;
  const runtime::MemoryGuardStatus& g = *stats.memory_guard;
  if (g.known) {
    Gauge(out, "spark:memory_available_bytes",
          "The least memory available on any rank's node at the guard's last reading.", l,
          static_cast<double>(g.available_bytes));
  }
  Header(out, "spark:memory_guard_state", "gauge",
         "The memory guard's state: 1 for the current one (ok, no-admit, shedding).");
  for (auto state : {runtime::GuardState::kOk, runtime::GuardState::kNoAdmit,
                     runtime::GuardState::kShed}) {
    Sample(out, "spark:memory_guard_state",
           l + ",state=\"" + std::string(runtime::GuardStateName(state)) + "\"",
           g.state == state ? 1 : 0);
  }
  Header(out, "spark:memory_floor_bytes", "gauge", "The memory guard's floors.");
  Sample(out, "spark:memory_floor_bytes", l + ",floor=\"admit\"",
         static_cast<double>(g.admit_floor_bytes));
  Sample(out, "spark:memory_floor_bytes", l + ",floor=\"hard\"",
         static_cast<double>(g.hard_floor_bytes));
  Header(out, "spark:memory_guard_trips_total", "counter",
         "Times memory fell below a floor (admit: admission held; hard: shedding).");
  Sample(out, "spark:memory_guard_trips_total", l + ",floor=\"admit\"",
         static_cast<double>(g.no_admit_trips));
  Sample(out, "spark:memory_guard_trips_total", l + ",floor=\"hard\"",
         static_cast<double>(g.shed_trips));
  Counter(out, "spark:requests_shed", "Requests failed with 503 by the memory guard.", l,
          g.shed_requests);
}

}  // namespace

std::string ServerMetrics::Render(const ServiceStats& stats) const {
  std::lock_guard lock(mu_);
  std::string out;
  const std::string& l = labels_;
  Gauge(out, "vllm:num_requests_running", "Number of requests in model execution batches.", l,
        stats.num_running);
  Gauge(out, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", l,
        stats.num_waiting);
  Gauge(out, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", l,
        stats.kv_usage);
  Counter(out, "vllm:prefix_cache_queries",
          "Prefix cache queries, in terms of number of queried tokens.", l, stats.prefix_queries);
  Counter(out, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
          l, stats.prefix_hits);
  Counter(out, "vllm:num_preemptions", "Cumulative number of preemption from the engine.", l,
          stats.num_preemptions);
  Counter(out, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", l,
          stats.spec_drafts);
  Counter(out, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", l,
          stats.spec_draft_tokens);
  Counter(out, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", l,
          stats.spec_accepted_tokens);
  if (!stats.spec_accepted_per_pos.empty()) {
    const std::string name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    Header(out, name, "counter", "Accepted tokens per draft position.");
    for (size_t i = 0; i < stats.spec_accepted_per_pos.size(); ++i) {
      Sample(out, name, l + ",position=\"" + std::to_string(i) + "\"",
             static_cast<double>(stats.spec_accepted_per_pos[i]));
    }
  }
  Gauge(out, "spark:spec_decode_mean_accepted_length",
        "Tokens a drafted sequence gains per step: 1 + accepted draft tokens / drafts (0: none).",
        l,
        stats.spec_drafts == 0
            ? 0.0
            : 1.0 + static_cast<double>(stats.spec_accepted_tokens) /
                        static_cast<double>(stats.spec_drafts));
  Counter(out, "vllm:prompt_tokens", "Number of prefill tokens processed.", l, prompt_tokens_);
  Counter(out, "vllm:generation_tokens", "Number of generation tokens processed.", l,
          generation_tokens_);
  Header(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = success_.find(reason);
    Sample(out, "vllm:request_success_total", l + ",finished_reason=\"" + reason + "\"",
           it == success_.end() ? 0.0 : static_cast<double>(it->second));
  }
  Counter(out, "spark:requests_rejected", "Requests refused with 429 (queue full).", l, rejected_);
  Header(out, "spark:decode_steps_total", "counter",
         "Decode steps run as captured CUDA graphs (mode graph) or eagerly (mode eager, by reason).");
  Sample(out, "spark:decode_steps_total", l + ",mode=\"graph\"",
         static_cast<double>(stats.decode_steps.graph));
  for (const auto& [reason, steps] : stats.decode_steps.eager) {
    Sample(out, "spark:decode_steps_total", l + ",mode=\"eager\",reason=\"" + reason + "\"",
           static_cast<double>(steps));
  }
  HistogramBlock(out, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", l,
                 prompt_len_);
  HistogramBlock(out, "vllm:request_generation_tokens", "Number of generation tokens processed.", l,
                 generation_len_);
  HistogramBlock(out, "vllm:request_params_n", "Histogram of the n request parameter.", l,
                 params_n_);
  HistogramBlock(out, "vllm:request_params_max_tokens",
                 "Histogram of the max_tokens request parameter.", l, params_max_tokens_);
  HistogramBlock(out, "vllm:time_to_first_token_seconds",
                 "Histogram of time to first token in seconds.", l, ttft_);
  HistogramBlock(out, "vllm:inter_token_latency_seconds",
                 "Histogram of inter-token latency in seconds.", l, itl_);
  HistogramBlock(out, "vllm:e2e_request_latency_seconds",
                 "Histogram of e2e request latency in seconds.", l, e2e_);
  RenderProgressAndMemory(out, l, stats);
  HistogramBlock(out, "vllm:request_queue_time_seconds",
                 "Histogram of time spent in WAITING phase for request.", l, queue_time_);
  HistogramBlock(out, "vllm:request_prefill_time_seconds",
                 "Histogram of time spent in PREFILL phase for request.", l, prefill_time_);
  HistogramBlock(out, "vllm:request_decode_time_seconds",
                 "Histogram of time spent in DECODE phase for request.", l, decode_time_);
  HistogramBlock(out, "vllm:request_inference_time_seconds",
                 "Histogram of time spent in RUNNING phase for request.", l, inference_time_);
  return out;
}

}  // namespace spark::engine::server
