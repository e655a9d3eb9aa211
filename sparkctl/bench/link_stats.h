// Latency summaries of the link tests (TCP and RDMA): p50 and p99 by the nearest-rank method
// (the sample at rank ceil(p/100 * n) of the sorted samples), as perftest reports them.
// Also the result of one link probe and its JSON (what `spark-bench link-probe` prints).
// Pure. Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::bench {

struct LatencySummary {
  double p50_us = 0;
  double p99_us = 0;
  int samples = 0;
};

// Sorts a copy of the samples (microseconds); zeros for no samples.
LatencySummary Summarize(std::vector<double> samples_us);

// Nearest-rank percentile of sorted samples, p in (0, 100].
double Percentile(const std::vector<double>& sorted, double p);

struct LinkProbeResult {
  std::string transport;  // "tcp" or "rdma-rc"
  std::string device;     // RDMA device, "" for TCP
  LatencySummary latency;
  double gbps = 0;
  size_t bytes = 0;
  double seconds = 0;
};

nlohmann::json ToJson(const LinkProbeResult& result);
// InvalidArgument naming the missing field.
Result<LinkProbeResult> LinkProbeResultFromJson(const nlohmann::json& json);

}  // namespace spark::bench
