// Running node-side sparkctl operations on every node of a cluster over SSH: build the transport
// from the inventory, install this build's bundle for each node's machine when the node lacks it
// (bundle/deploy.h: refused, with the fix, on a node that cannot run it), then run
// `sparkctl node facts` / `node beacon` / `node probe` in parallel and parse their JSON.
//
// One round trip per operation: the command picks the installed bundle for the node's machine
// and runs its sparkctl in the same SSH exec; only a node that lacks it gets more trips (read
// the platform, upload, then run).
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

// Installs the bundle on the node if needed and runs `sparkctl node ARGS`; returns its stdout.
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

// Facts and beacons of one node from a single `sparkctl node probe`.
struct NodeProbe {
  NodeObservation observation;  // name + facts (or the node's error)
  Result<BeaconReport> beacons = InternalError("not gathered");
};

// Facts and beacons from every node in one SSH round trip each (discover and preflight).
// Beacons run for at most `max_beacon` and stop earlier once every link has heard its peer
// (see RunBeacons). When some node first needs this binary installed, it is installed and the
// probe repeated on every node, so that all beacon windows overlap.
std::vector<NodeProbe> CollectProbes(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                     const std::string& disk_path,
                                     std::chrono::milliseconds max_beacon);

}  // namespace spark::host
