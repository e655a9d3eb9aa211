// The simulated cluster's networking, as `ip -batch` scripts: the management bridge the host
// joins, one network namespace per Spark with the DGX netdev names, and the "wires" namespace
// whose bridges are the DAC cables (or the switch rails). Batch generation is pure; Apply*
// run it through a Runner.
//
// Naming: node netns "sparksim-<cluster>-<hostname>", wires netns "sparksim-<cluster>-wires",
// host bridge "sim<slot>-mgmt", host veth ends "sim<slot>-n<rank>" (IFNAMSIZ is 16).
// Thread-safety: functions only.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/sim/cluster_state.h"
#include "base/process.h"

namespace spark::sim {

// Fills names and addresses of a new cluster (slot 0..254 gives 198.19.<slot>.0/24).
ClusterState PlanCluster(const std::string& name, Topology topology, int nodes, int slot);

// Host namespace: bridge + its address, management veths, fabric veths between each node and
// the wires namespace. Requires the namespaces to exist.
std::vector<std::string> HostBatch(const ClusterState& cluster);
// Wires namespace: the cable (or rail) bridges and the initial wiring.
std::vector<std::string> WiresBatch(const ClusterState& cluster);
// A node: loopback, management address, fabric netdevs up.
std::vector<std::string> NodeBatch(const ClusterState& cluster, const NodeState& node);

// Runs `ip [-n NETNS] -batch -` with the lines. Internal with ip's message on failure.
Status RunIpBatch(Runner& runner, const std::string& netns, const std::vector<std::string>& lines);

// Creates every namespace and link. Fills cluster.made_netns_mount.
Status CreateNetwork(Runner& runner, ClusterState& cluster);

// Applies the cabling of the current faults, given the cabling of the previous ones.
Status Rewire(Runner& runner, const ClusterState& cluster, const FabricFaults& before);

// Deletes the namespaces and the bridge that exist (missing ones are fine: also after a crash),
// and /run/netns's mount point when the simulator made it and no namespace is left.
Status DeleteNetwork(Runner& runner, const ClusterState& cluster, bool netns_mount_ours);

// Names of the existing network namespaces (`ip netns list`).
std::vector<std::string> ListNetns(Runner& runner);

}  // namespace spark::sim
