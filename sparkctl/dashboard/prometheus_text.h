// Reading the engine's /metrics (Prometheus text format 0.0.4) for the dashboard: samples with
// their labels, sums over label sets, the change of a counter between two bodies and a
// histogram's quantile from the change of its buckets, as Prometheus's histogram_quantile
// computes it (linear inside a bucket).
// Thread-safety: values and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spark::dashboard {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples of a body; comment lines and malformed lines are skipped.
std::vector<Sample> ParsePrometheus(std::string_view body);

class MetricsBody {
 public:
  MetricsBody() = default;
  explicit MetricsBody(std::string_view body) : samples_(ParsePrometheus(body)) {}
  bool empty() const { return samples_.empty(); }
  const std::vector<Sample>& samples() const { return samples_; }
  // The sum of the samples named `name` (all label sets); nullopt when there are none.
  std::optional<double> Sum(std::string_view name) const;
  // Cumulative bucket counts of histogram `name` (summed over label sets), by upper bound.
  std::map<double, double> Buckets(std::string_view name) const;

 private:
  std::vector<Sample> samples_;
};

// The q-quantile (0..1) of the observations histogram `name` gained between `before` and
// `after` (all of `after`'s when `before` is empty); nullopt without new observations.
std::optional<double> QuantileOfChange(const MetricsBody& before, const MetricsBody& after,
                                       std::string_view name, double q);

}  // namespace spark::dashboard
