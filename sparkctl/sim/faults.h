// Fault injection into a simulated cluster, from outside the nodes, the way things break on real
// Sparks: cables pulled, swapped or miscabled; a bad kernel, no CMA, a low memlock limit, sshd
// down, a duplicated machine-id, a FORWARD DROP firewall, a killed process, memory that runs
// short (MemAvailable in /proc/meminfo); and a node that reports another machine or an older
// glibc (one sparkctl's programs cannot run on).
//
// Every fault has an inverse (plug, swap/miscable again, `default` values, sshd start,
// forward-accept) and `clear` restores the cluster as created. Faults are recorded in the
// cluster's state file, so they survive between sparkctl invocations.
// Thread-safety: functions only; one sparkctl per cluster at a time.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/sim/cluster_state.h"
#include "base/process.h"

namespace spark::sim {

enum class FaultKind {
  kUnplug, kPlug, kSwap, kMiscable, kKernel, kCma, kMemlock, kSshd, kMachineId,
  kForwardDrop, kForwardAccept, kKill, kMemory, kMachine, kGlibc, kClear,
};

struct Fault {
  FaultKind kind = FaultKind::kClear;
  std::string node;   // name or rank, as given
  int port = 0;       // unplug, plug, swap
  std::string value;  // kernel release, CMA KiB, memlock, stop|start, machine-id, pattern, KiB
};

// Parses `KIND ARGS...` (e.g. {"unplug", "spark-1", "0"}). InvalidArgument with the usage of
// the kind, or with a suggestion for an unknown kind.
Result<Fault> ParseFault(const std::vector<std::string>& args);

// One line per kind: "unplug NODE PORT   pull the cable at NODE's PORT (0|1)" ...
std::string FaultUsage();

// Applies the fault to the live cluster and to `cluster` (the caller saves it). NotFound for an
// unknown node or a kill pattern matching nothing; FailedPrecondition for a fault the topology
// does not allow (miscable on a pair or switch); Internal when a command fails.
Status ApplyFault(Runner& runner, const std::string& cluster_dir, ClusterState& cluster,
                  const Fault& fault);

// Regenerates the emulated RDMA tree of a node from its live netdevs.
Status RefreshNode(Runner& runner, const NodeState& node);

}  // namespace spark::sim
