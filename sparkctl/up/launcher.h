// Starting, stopping and watching the engine ranks of a launch plan over a Transport, every node
// in parallel. The shell text comes from launch_plan.h and rank_status.h; this file only runs it.
// Thread-safety: functions; the Transport must be thread-safe (all are).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/up/launch_plan.h"
#include "sparkctl/up/node_status.h"

namespace spark::up {

struct StartedRank {
  int rank = 0;
  int pid = 0;
  bool systemd = false;
};

// Starts every rank (systemd-run where /run/systemd/system exists, else setsid with a pidfile).
// Aborted naming the node and rank when a start command fails; connection errors of the
// Transport. Ranks that did start are left running: the caller stops the whole plan.
Result<std::vector<StartedRank>> StartRanks(ssh::Transport& transport, const LaunchPlan& plan);

// Stops every rank: SIGTERM, the plan's deadline, SIGKILL; rank 0 first (it drains and lets its
// workers go), then the others in parallel. One line per rank in `report`
// ("rank 1 spark-1: stopped 4242"). Errors: unreachable nodes (the others are still stopped).
Status StopRanks(ssh::Transport& transport, const LaunchPlan& plan,
                 std::vector<std::string>* report = nullptr);

// One probe per node of the plan, in parallel; an unreachable node gets its error in
// NodeProbe::reachable. `metrics_samples`: /metrics bodies from rank 0's node (2 for tokens/s).
// `node_extras`: ProbeCommand's link counters and GPU (off for the monitor's liveness polls).
std::vector<NodeProbe> ProbeNodes(ssh::Transport& transport, const LaunchPlan& plan,
                                  int metrics_samples = 0,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(15),
                                  bool node_extras = true);

struct WaitOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  std::chrono::milliseconds poll = std::chrono::milliseconds(500);
  // A degraded verdict must persist this long before the wait gives up (a status file being
  // replaced reads as missing for an instant). Default: 1.5 s.
  std::chrono::milliseconds degraded_grace = std::chrono::milliseconds(1500);
  // Called after every poll (progress display).
  std::function<void(const ClusterHealth&)> on_poll;
};

// Polls until rank 0's /ready answers 200 and every rank is ready. Aborted with the degraded
// reason (naming the rank and its last log lines) when a rank exits, fails or hangs;
// DeadlineExceeded when the timeout passes first.
Status WaitReady(ssh::Transport& transport, const LaunchPlan& plan, const WaitOptions& options);

}  // namespace spark::up
