// Cluster-wide verify: runs the node-side `sparkctl weights verify --json` on every node of the
// inventory at once (the manifest travels on the command's stdin, so nothing is written on the
// nodes) and merges the per-node VerifyReports into one ClusterVerifyReport. What
// `sparkctl weights verify -p PROFILE` prints and what `sparkctl up` checks before a launch.
//
// Progress: the current Transport returns a command's stderr only when it ends, so live byte
// counts from the nodes cannot be shown; instead `on_node_done` fires as each node's result
// arrives (the CLI prints one line per node, and a "waiting for ..." line every 10 s).
// Thread-safety: VerifyOnAllNodes blocks; on_node_done is called from pool threads, serialised
// by an internal mutex.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/weights/manifest_verify.h"

namespace spark::weights {

inline constexpr std::string_view kClusterVerifySchema = "sparkctl-weights-cluster-verify/v1";

// One node's outcome: either a report (status OK) or why there is none (unreachable, sparkctl
// could not be installed, the directory is unusable...).
struct NodeVerify {
  std::string node;
  Status status;
  VerifyReport report;  // meaningful only when status.ok()
  double seconds = 0;   // wall time of the node's check, as seen by the controller

  bool ok(bool allow_extra) const { return status.ok() && report.ok(allow_extra); }
};

struct ClusterVerifyReport {
  std::string manifest;  // the controller-side manifest path
  std::string dir;       // profile model.path: where every node keeps its copy
  std::string repository;
  std::string revision;
  bool allow_extra = false;
  std::vector<NodeVerify> nodes;  // ring (rank) order

  bool ok() const;
  // Nodes that could not be checked at all.
  size_t Unreachable() const;
};

struct ClusterVerifyOptions {
  // The remote sparkctl to run. Default (empty): install this binary on each node with
  // bundle::EnsureProgram and run that.
  std::string sparkctl_path;
  bool allow_extra = false;  // extra files do not fail a node
  bool use_cache = true;     // nodes answer unchanged files from their verify cache
  bool create_dir = false;   // `mkdir -p DIR` first (sync does; a plain verify never writes)
  std::chrono::milliseconds timeout{std::chrono::hours(6)};  // per node: hashing 500 GB cold
  // Called once per node as its result arrives, in completion order.
  std::function<void(const NodeVerify&, size_t done, size_t total)> on_node_done;
};

// Node names in ring order: by rank when every node has one, else inventory order.
std::vector<std::string> RingOrder(const netplan::ClusterSpec& cluster);

// Verifies `dir` against the manifest text on every node in parallel. Never fails because of one
// node: each node's problem is in its NodeVerify. InvalidArgument for a manifest that does not
// parse here (checked before any node is contacted).
Result<ClusterVerifyReport> VerifyNodes(ssh::Transport& transport,
                                        const std::vector<std::string>& nodes,
                                        const std::string& manifest_path,
                                        const std::string& manifest_text, const std::string& dir,
                                        const ClusterVerifyOptions& options = {});

// The profile's manifest (ResolvedManifestPath) checked at profile.model.path on every node of
// the cluster. NotFound / InvalidArgument for the manifest naming its file and the profile.
Result<ClusterVerifyReport> VerifyOnAllNodes(ssh::Transport& transport,
                                             const netplan::ClusterSpec& cluster,
                                             const profile::Profile& profile,
                                             const ClusterVerifyOptions& options = {});

// JSON (schema kClusterVerifySchema): ok, counts, and per node its error or its full
// sparkctl-weights-verify/v1 report.
std::string FormatClusterVerifyJson(const ClusterVerifyReport& report);

// For people: one line per node, one line per file that is not ok ("spark-2: a.bin:
// hash_mismatch: ..."), a summary with the fix.
std::string FormatClusterVerifyText(const ClusterVerifyReport& report);

// One progress line for a finished node ("spark-2: ok, 48 files, 476.0 GiB in 4.1 s (2/4)").
std::string FormatNodeDoneLine(const NodeVerify& node, size_t done, size_t total);

}  // namespace spark::weights
