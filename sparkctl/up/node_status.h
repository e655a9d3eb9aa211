// What runs where: one SSH round trip per node reads the node's kernel, memory, fabric links and,
// for each rank on it, the engine's pid, process state, status file and last log lines (and on
// rank 0's node the endpoint's /ready and /metrics). Parsing and judging are pure functions, so
// `sparkctl status`, the progress display of `up` and the monitor share them and unit tests feed
// them text.
//
// The engine writes its status file atomically as one JSON object:
//   {"rank","world_size","pid","phase":"starting|connecting|loading|warming|ready|failed|stopped",
//    "progress":0..1,"message","updated","steps","tokens","busy","progressed",
//    "memory":{"available_bytes","guard"}}
// and rewrites it every second while ready. A ready rank is hung when the file stops changing
// (a stopped or frozen process) or when it sits in one step with its counters still for the
// progress timeout; a rank busy with a long prefill advances its counters every chunk.
// Thread-safety: values and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::up {

struct EngineStatus {
  std::string phase;  // "" when the file is missing or unreadable
  double progress = 0;
  std::string message;
  double updated = 0;  // seconds since the epoch; 0 when absent
  int pid = 0;
  // Liveness (absent from older engines: 0 / false).
  uint64_t steps = 0;
  uint64_t tokens = 0;
  bool busy = false;
  double progressed = 0;  // when the counters last moved, seconds since the epoch
  // The node's memory as the engine reads it, and rank 0's memory guard ("" when absent).
  int64_t memory_available_bytes = -1;
  std::string memory_guard;
};

struct RankProbe {
  int rank = 0;
  int pid = 0;              // from the pidfile; 0 when none
  char proc_state = 0;      // /proc/PID/stat state ('R', 'S', 'T', 'Z'...); 0: no such process
  bool ours = false;        // the process's command line names this rank's status file
  EngineStatus status;
  std::vector<std::string> log_tail;

  bool Alive() const { return pid > 0 && ours && proc_state != 0 && proc_state != 'Z'; }
  bool Stopped() const { return Alive() && (proc_state == 'T' || proc_state == 't'); }
};

struct NodeProbe {
  std::string node;
  Status reachable;  // the SSH error when the node could not be probed
  std::string kernel;
  int64_t mem_total_kib = 0;
  int64_t mem_available_kib = 0;
  std::map<std::string, std::string> links;  // fabric netdev -> operstate ("absent")
  // More of /proc/meminfo, in KiB; -1 where the node has no such line.
  int64_t swap_total_kib = -1;
  int64_t swap_free_kib = -1;
  int64_t cached_kib = -1;  // page cache
  int64_t cma_free_kib = -1;
  // Per present fabric netdev: speed (Mb/s, -1 unknown), MTU, and counters that only grow
  // (statistics rx/tx_dropped, the RDMA port's hw_counters, PFC pause frames from ethtool).
  struct LinkDetail {
    int64_t speed_mbps = -1;
    int mtu = -1;
    std::map<std::string, uint64_t> counters;
  };
  std::map<std::string, LinkDetail> link_details;
  // The GPU as nvidia-smi reports it; absent without nvidia-smi, -1 for a field it gives as N/A.
  struct Gpu {
    double utilization_percent = -1;
    double temperature_c = -1;
    double sm_clock_mhz = -1;
    double power_w = -1;
  };
  std::optional<Gpu> gpu;
  double now = 0;                            // the node's clock, seconds since the epoch
  std::vector<RankProbe> ranks;
  // Rank 0's node only: HTTP status of /ready (0: no answer) and /metrics samples.
  std::optional<int> ready_http;
  std::vector<std::string> metrics;  // up to two /metrics bodies, one second apart
};

// The probe for the ranks of `plan` on `node`. `endpoint`: also ask /ready (and with
// `metrics_samples` > 0 that many /metrics bodies a second apart). `node_extras`: also the
// links' speed, MTU and counters (ethtool) and the GPU (nvidia-smi), which status and the
// dashboard show; the monitor's probe every second leaves them out (Assess does not read them).
std::string ProbeCommand(const LaunchPlan& plan, const std::string& node, bool endpoint,
                         int metrics_samples, int log_lines = 5, bool node_extras = true);

// Parses ProbeCommand's output. InvalidArgument when a section is malformed.
Result<NodeProbe> ParseProbe(const std::string& node, std::string_view text);

// Parses one status file. InvalidArgument for text that is not the expected JSON object.
Result<EngineStatus> ParseEngineStatus(std::string_view text);

// The sum of a Prometheus counter's samples in a /metrics body; nullopt when absent.
std::optional<double> MetricValue(std::string_view body, std::string_view name);

enum class Health { kDown, kStarting, kReady, kDegraded };
std::string_view HealthName(Health health);  // "down", "starting", "ready", "degraded"

struct RankVerdict {
  int rank = 0;
  std::string node;
  std::string phase;  // the engine's phase, "exited", "hung", "unreachable" or "not started"
  double progress = 0;
  int pid = 0;
  bool problem = false;
  std::string why;  // for a problem: what happened, with the last log lines
  uint64_t steps = 0, tokens = 0;
  bool busy = false;
  double progress_age_s = -1;  // since the counters last moved (node clock); -1 unknown
  int64_t memory_available_bytes = -1;
  std::string memory_guard;
};

struct ClusterHealth {
  Health health = Health::kDown;
  std::vector<RankVerdict> ranks;
  std::string reason;  // for kDegraded: the first problem, naming the rank
  bool endpoint_ready = false;
  std::optional<double> tokens_per_second;
  std::string memory_guard;  // rank 0's guard state ("" when its engine reports none)
};

struct AssessOptions {
  // A rank whose status file stopped changing for this long while it was ready counts as hung,
  // once the engine has shown it refreshes the file (heartbeat). Default: 5 s.
  double heartbeat_timeout_s = 5;
  bool heartbeat_seen = false;
  // A ready rank inside one step whose step and token counters have not moved for this long
  // counts as hung (a long prefill moves them every chunk). Default: 120 s.
  double progress_timeout_s = 120;
};

// Judges the probes of every node against the plan. Any rank that exited, failed, hangs or is
// unreachable makes the model degraded; every rank ready and /ready 200 makes it ready.
ClusterHealth Assess(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                     const AssessOptions& options = {});

// One line per rank for the progress display of `up`:
//   rank 0 spark-0  loading   42%  reading shards
std::string RenderProgress(const ClusterHealth& health);

// The status table (per node: reachable, kernel, links, engine phase and pid, memory; then the
// endpoint) and its JSON form (schema sparkctl-status/v1).
std::string RenderStatus(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                         const ClusterHealth& health);
nlohmann::ordered_json StatusJson(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                                  const ClusterHealth& health);

}  // namespace spark::up
