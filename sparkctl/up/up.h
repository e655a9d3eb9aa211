// `sparkctl up`: from checked nodes to a serving endpoint, in the order of docs/up.md:
//   preflight (stop on a failed check, with its hint) -> host pin check -> fabric (apply only
//   when it differs from the plan) -> quick fabric check (net verify) -> weights (verify; sync
//   with --sync-weights) -> the bundle for each node's machine, with its spark-engine
//   (bundle/deploy.h: installed by content where missing) -> memory plan on each node's
//   MemAvailable (node_memory.h; stop when a node would keep less than the profile's start-up
//   floor) -> launch (one spark-engine per rank, launcher.h) -> wait for rank 0's /ready with
//   progress.
// Idempotent: when the state file records the same launch hash and the ranks run, nothing is
// touched ("already up"); a different hash (profile, inventory, engine build) stops every rank
// and starts them all again (a single rank cannot rejoin its group).
// Nothing on the nodes changes before the checks pass; --plan changes nothing at all.
// Thread-safety: RunUp blocks its caller; the observer is called from that thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/up/launch_plan.h"
#include "sparkctl/up/node_status.h"
#include "sparkctl/up/state_file.h"

namespace spark::up {

struct UpOptions {
  std::string cluster_file;  // absolute, recorded in the state
  std::string profile_file;  // absolute, recorded in the state
  std::string state_dir;     // StateDir(root, cluster name)
  std::string engine_binary; // spark-engine for the nodes in place of their bundle's; "" = the bundle's
  int master_port = 29500;
  int stop_deadline_s = 20;
  bool plan_only = false;     // report what would happen; change nothing
  bool sync_weights = false;  // copy missing/corrupt weight files between nodes
  bool auto_recover = true;   // recorded for the monitor
  bool skip_fabric = false;   // no net apply/verify (single node, or managed elsewhere)
  std::chrono::seconds ready_timeout{600};
};

struct StepReport {
  std::string name;    // preflight, host-pin, fabric, fabric-check, weights, engine, launch, ready
  std::string result;  // ok, warn, changed, skipped, would-change, failed
  std::string detail;  // one or more lines for people
  double seconds = 0;
};

// How RunUp talks to the person (or the JSON writer) running it.
class UpObserver {
 public:
  virtual ~UpObserver() = default;
  virtual void OnStep(const StepReport& step) = 0;
  virtual void OnProgress(const ClusterHealth& health) = 0;
  // Asked before the fabric of the nodes changes; false stops `up` (exit "needs input").
  virtual bool Confirm(const std::string& what) = 0;
};

struct UpReport {
  std::vector<StepReport> steps;
  LaunchPlan plan;
  std::string action;  // "started", "restarted", "already up", "would start", ...
  double seconds = 0;
};

// Runs the steps. Errors: FailedPrecondition for a failed check (preflight, pin, fabric,
// weights) with every failure and its fix, Cancelled when the person declined, Aborted when a
// rank failed while starting (the ranks are stopped again, logs kept), DeadlineExceeded when
// /ready did not come in time; connection errors name the node. On error, `report` holds the
// steps done so far.
Status RunUp(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
             const profile::Profile& profile, const UpOptions& options, UpObserver& observer,
             UpReport* report);

// Stops every rank of the recorded state and removes the state file. Errors of StopRanks (the
// state is kept then, so `down` can be run again).
Status Down(ssh::Transport& transport, const std::string& state_dir,
            std::vector<std::string>* lines);

}  // namespace spark::up
