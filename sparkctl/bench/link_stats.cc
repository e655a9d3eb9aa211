// Latency summaries of the link tests (see link_stats.h).
#include "sparkctl/bench/link_stats.h"

#include <algorithm>
#include <cmath>

namespace spark::bench {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

LatencySummary Summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {Percentile(samples, 50), Percentile(samples, 99), static_cast<int>(samples.size())};
}

nlohmann::json ToJson(const LinkProbeResult& r) {
  return {{"transport", r.transport}, {"device", r.device},
          {"latency_us", {{"p50", r.latency.p50_us}, {"p99", r.latency.p99_us},
                          {"samples", r.latency.samples}}},
          {"bandwidth_gbps", r.gbps}, {"bytes", r.bytes}, {"seconds", r.seconds}};
}

Result<LinkProbeResult> LinkProbeResultFromJson(const nlohmann::json& j) {
  try {
    LinkProbeResult r;
    r.transport = j.at("transport").get<std::string>();
    r.device = j.at("device").get<std::string>();
    const auto& l = j.at("latency_us");
    r.latency = {l.at("p50").get<double>(), l.at("p99").get<double>(), l.at("samples").get<int>()};
    r.gbps = j.at("bandwidth_gbps").get<double>();
    r.bytes = j.at("bytes").get<size_t>();
    r.seconds = j.at("seconds").get<double>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("link-probe JSON: ") + e.what());
  }
}

}  // namespace spark::bench
