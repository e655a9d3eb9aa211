#include "engine/server/metrics.h"

#include <cstdio>

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

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + Number(v) + "\n";
}

}  // namespace

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
    const std::string le = i < bounds_.size() ? Number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  Sample(out, name + "_sum", labels, sum_);
  Sample(out, name + "_count", labels, static_cast<double>(count_));
}

ServerMetrics::ServerMetrics(std::string model_name)
    : labels_("model_name=\"" + EscapeLabel(model_name) + "\""),
      ttft_(kTtftBuckets),
      itl_(kItlBuckets),
      e2e_(kE2eBuckets) {}

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

void ServerMetrics::ObserveRequestDone(double seconds, const std::string& finish_reason) {
  std::lock_guard lock(mu_);
  e2e_.Observe(seconds);
  ++success_[finish_reason];
}

void ServerMetrics::CountRejected() {
  std::lock_guard lock(mu_);
  ++rejected_;
}

std::string ServerMetrics::Render(const ServiceStats& stats) const {
  std::lock_guard lock(mu_);
  std::string out;
  const std::string& l = labels_;
  Header(out, "vllm:num_requests_running", "gauge",
         "Number of requests in model execution batches.");
  Sample(out, "vllm:num_requests_running", l, stats.num_running);
  Header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  Sample(out, "vllm:num_requests_waiting", l, stats.num_waiting);
  Header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  Sample(out, "vllm:kv_cache_usage_perc", l, stats.kv_usage);
  Header(out, "vllm:prefix_cache_queries", "counter", "Prefix cache queries, in terms of tokens.");
  Sample(out, "vllm:prefix_cache_queries_total", l, static_cast<double>(stats.prefix_queries));
  Header(out, "vllm:prefix_cache_hits", "counter", "Prefix cache hits, in terms of tokens.");
  Sample(out, "vllm:prefix_cache_hits_total", l, static_cast<double>(stats.prefix_hits));
  Header(out, "vllm:prompt_tokens", "counter", "Number of prefill tokens processed.");
  Sample(out, "vllm:prompt_tokens_total", l, static_cast<double>(prompt_tokens_));
  Header(out, "vllm:generation_tokens", "counter", "Number of generation tokens processed.");
  Sample(out, "vllm:generation_tokens_total", l, static_cast<double>(generation_tokens_));
  Header(out, "vllm:request_success", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = success_.find(reason);
    Sample(out, "vllm:request_success_total", l + ",finished_reason=\"" + reason + "\"",
           it == success_.end() ? 0.0 : static_cast<double>(it->second));
  }
  Header(out, "spark:requests_rejected", "counter", "Requests refused with 429 (queue full).");
  Sample(out, "spark:requests_rejected_total", l, static_cast<double>(rejected_));
  Header(out, "vllm:time_to_first_token_seconds", "histogram",
         "Histogram of time to first token in seconds.");
  ttft_.Render("vllm:time_to_first_token_seconds", l, out);
  Header(out, "vllm:inter_token_latency_seconds", "histogram",
         "Histogram of inter-token latency in seconds.");
  itl_.Render("vllm:inter_token_latency_seconds", l, out);
  Header(out, "vllm:e2e_request_latency_seconds", "histogram",
         "Histogram of e2e request latency in seconds.");
  e2e_.Render("vllm:e2e_request_latency_seconds", l, out);
  return out;
}

}  // namespace spark::engine::server
