// Starting the ranks of a collective benchmark (`sparkctl bench allreduce|allgather`, and the
// selftest's all-reduce check): the per-rank program spark-bench (collective_rank.h) is
//   local    started N times on this machine as child processes, rank r on CUDA device r
//            (or N CPU ranks with Gloo), rendezvous on 127.0.0.1 at a free port;
//   cluster  installed on every node of the inventory from the bundle for its machine
//            (InstallBench, bundle/deploy.h) and started there over SSH, one rank per node in rank
//            order, with the NCCL environment the netplan library planned for that node;
//            rank 0's node serves the rendezvous on its control-plane address (WireGuard when
//            the tunnel is up, else the management LAN: fabric/control_plane.h).
// Rank 0's report (nccl-tests text or JSON) is the result; a failing rank is named with its
// node and the tail of its stderr. Thread-safety: functions; they block their caller.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/node_plan.h"
#include "sparkctl/bench/collective_options.h"
#include "sparkctl/fabric/control_plane.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/ssh/transport.h"

namespace spark::bench {

// Where spark-bench is installed on nodes.

struct RunReport {
  std::string output;   // rank 0's stdout: the report
  int exit_code = 0;    // rank 0's exit status (2 = wrong results)
  double seconds = 0;
};

// spark-bench next to the running binary (/proc/self/exe's folder), or `override_path` when
// not empty. NotFound saying how to build it.
Result<std::string> FindBenchProgram(const std::string& override_path);

// Starts `ranks` local ranks; rank 0's stdout is captured into the report (or passed through
// to this process's stdout when `passthrough`). Errors: the first failing rank > 0 ("rank 1
// exited with status 2: <stderr tail>"), DeadlineExceeded after `timeout`.
Result<RunReport> RunLocal(const std::string& program, const CollectiveOptions& options, int ranks,
                           bool use_gpus, std::chrono::seconds timeout, bool passthrough);

// One node of a cluster run.
struct ClusterRank {
  std::string node;                 // inventory name (the SSH target)
  std::string control_address;      // rank 0's is the rendezvous address
  std::vector<netplan::EnvVar> env;  // NCCL environment from the netplan library
  // The one-shot transport's links (netplan/oneshot_links.h); empty when the plan has none.
  std::string oneshot_topology, oneshot_addresses, oneshot_rails;
};

// One rank per node of `changes`, in rank order, with the control plane's addresses, its
// NCCL_SOCKET_IFNAME and the one-shot links of the fabric plan.
std::vector<ClusterRank> ClusterRanks(const fabric::ClusterChanges& changes,
                                      const fabric::ControlPlane& control);

// The remote shell command of one rank (exported for tests).
std::string RankCommand(const std::string& remote_program, const CollectiveOptions& options,
                        const RankPlacement& placement, const std::vector<netplan::EnvVar>& env);

// Installs the bundle for the node's machine with its spark-bench (or `program` in its place
// when not empty: a local spark-bench of the node's machine) and returns spark-bench's path on
// the node. Errors of bundle::EnsureProgram.
Result<std::string> InstallBench(ssh::Transport& transport, const std::string& node,
                                 const std::string& program);

// Installs spark-bench on every node (InstallBench) and runs one rank per node, in parallel.
// Errors name the node: the install failing, a rank exiting non-zero other than with wrong
// results.
Result<RunReport> RunCluster(ssh::Transport& transport, const std::string& program,
                             const CollectiveOptions& options,
                             const std::vector<ClusterRank>& ranks, int master_port,
                             std::chrono::seconds timeout);

}  // namespace spark::bench
