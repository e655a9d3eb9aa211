// Running node-side sparkctl operations on every node of a cluster over SSH: build the transport
// from the inventory, install this very binary on each node when it differs, then run
// `sparkctl node facts` / `sparkctl node beacon` in parallel and parse their JSON.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/host/beacon.h"
#include "sparkctl/host/checks.h"
#include "sparkctl/ssh/transport.h"

namespace spark::host {

struct RemoteOptions {
  bool accept_new = false;  // add unknown host keys on first contact (never changed ones)
};

// The SSH transport for every node of the inventory. InvalidArgument for bad SSH settings.
Result<std::unique_ptr<ssh::Transport>> MakeTransport(const netplan::ClusterSpec& cluster,
                                                      const RemoteOptions& options);

std::vector<std::string> NodeNames(const netplan::ClusterSpec& cluster);

// Installs sparkctl on the node if needed and runs `sparkctl node ARGS`; returns its stdout.
// Errors name the node.
Result<std::string> RunNodeCommand(ssh::Transport& transport, const std::string& node,
                                   const std::string& args, std::chrono::milliseconds timeout);

// Facts from every node, in parallel; an unreachable node gets its error, not a hang.
std::vector<NodeObservation> CollectFacts(ssh::Transport& transport,
                                          const netplan::ClusterSpec& cluster,
                                          const std::string& disk_path);

// Beacons on every node at once (all must run concurrently to hear each other).
std::vector<Result<BeaconReport>> CollectBeacons(ssh::Transport& transport,
                                                 const netplan::ClusterSpec& cluster,
                                                 std::chrono::milliseconds duration);

}  // namespace spark::host
