// One second of the cluster as the dashboard shows it: built from exactly what `sparkctl status`
// reads (the same probes, the same Assess verdict and the same StatusJson document, kept whole
// under "status"), plus what needs two samples: rates of link counters, the ranks' step time,
// the endpoint's token rates and latency percentiles from the engine's /metrics. The event log
// comes from the difference between two snapshots.
// Thread-safety: SnapshotBuilder is used from one thread (the collector's); the rest are pure.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sparkctl/dashboard/prometheus_text.h"
#include "sparkctl/up/launch_plan.h"
#include "sparkctl/up/node_status.h"

namespace spark::dashboard {

inline constexpr char kSnapshotSchema[] = "sparkctl-dashboard/v1";

// What one collector tick saw. `plan` null: nothing runs on the cluster (no state).
struct TickInput {
  double time = 0;  // the controller's clock, seconds since the epoch
  const up::LaunchPlan* plan = nullptr;
  std::vector<up::NodeProbe> probes;
  up::ClusterHealth health;
  int restarts = 0;
  std::string down_reason;  // when plan is null: why (state missing or unreadable)
};

class SnapshotBuilder {
 public:
  // Percentiles and ratios over this many seconds of /metrics (default 60).
  explicit SnapshotBuilder(double window_s = 60) : window_s_(window_s) {}
  // The snapshot (schema sparkctl-dashboard/v1): {"schema","time","status":<StatusJson>,
  // "nodes":[...],"ranks":[...],"endpoint":{...}}.
  nlohmann::ordered_json Build(const TickInput& tick);

 private:
  double window_s_;
  double last_time_ = 0;
  std::map<std::string, std::map<std::string, uint64_t>> link_counters_;  // node/dev -> counters
  std::map<int, uint64_t> steps_;
  std::map<int, double> step_time_ms_;  // last measured, kept while the counters stand
  std::deque<std::pair<double, MetricsBody>> metrics_;  // the window, oldest first
};

// The event log lines between two snapshots (oldest first): node reachability, rank phase
// changes (exits, hangs, restarts), restarts, memory guard changes and trips, link state
// changes. Each: {"time","kind","text"}; kinds "node", "rank", "restart", "guard", "fabric",
// "health".
std::vector<nlohmann::ordered_json> DiffEvents(const nlohmann::ordered_json& before,
                                               const nlohmann::ordered_json& after);

// The small row of the hour of history the charts draw: {"t", "mem":{node:GiB},
// "swap":{node:GiB}, "gpu":{node:%}, "gen_tps", "prompt_tps", "running", "waiting", "kv"}.
nlohmann::ordered_json HistoryRow(const nlohmann::ordered_json& snapshot);

}  // namespace spark::dashboard
