// Fabric changes: what `sparkctl net plan` shows and `net apply` does on each node. Reads every
// node's current state in parallel (one SSH round trip each, see node_state.h), renders the
// netplan library's plan with the facts found there (management interface, WireGuard keys kept
// on the node), and diffs: runtime changes (netplan::DiffState), files to (re)write, and whether
// the WireGuard control plane must be (re)loaded. Reading changes nothing on any node.
//
// Thread-safety: functions; the Transport must be thread-safe (all are).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "netplan/node_plan.h"
#include "netplan/render.h"
#include "netplan/state_diff.h"
#include "sparkctl/fabric/node_state.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {

struct PlanOptions {
  // Bring up the WireGuard control plane. Default: on.
  bool control_plane = true;
};

struct FileChange {
  netplan::FileContent file;
  std::string why;  // "missing", "content differs", "mode 644, want 600"
};

struct NodeChanges {
  std::string node;
  std::string management_address;    // the SSH target
  std::string management_interface;  // the netdev carrying it: never touched
  netplan::NodePlan plan;            // with the node's real inputs
  NodeSnapshot before;               // state read before anything changed
  std::vector<netplan::Change> runtime;  // iproute2 / sysctl changes, in order
  std::vector<FileChange> files;         // files to write
  bool wireguard = false;                // (re)load the WireGuard interface
  std::string wireguard_why;
  bool needs_key = false;  // no WireGuard key on the node yet (apply makes one there)
  // Switched fabrics: the lossless-RoCE settings (roce_qos.h) are not all in place.
  bool qos = false;
  std::string qos_why;  // "enp1s0f0np0: PFC off on priority 3, ..."
  // NCCL_IB_GID_INDEX is not in plan.nccl_env yet: no fabric netdev had an address, so no
  // RoCE v2 IPv4 GID existed; apply reads it once the addresses are there.
  bool gid_pending = false;

  // The netdevs sparkctl manages on this node (the fabric twins of the plan).
  std::set<std::string> FabricNetdevs() const;
  size_t Count() const {
    return runtime.size() + files.size() + (wireguard ? 1 : 0) + (qos ? 1 : 0);
  }
};

struct ClusterChanges {
  netplan::ClusterSpec spec;
  netplan::FabricPlan fabric;     // every node's plan (WireGuard endpoints as used)
  std::vector<NodeChanges> nodes;  // by rank
  std::vector<std::string> notes;  // what the user should know (GID indexes read after apply)

  size_t Count() const;
  const NodeChanges* Find(const std::string& node) const;
};

// FailedPrecondition when the inventory has no ranks or no fabric.kind (run `sparkctl
// discover`), when a planned fabric netdev carries the management address, when a node lacks
// a fabric netdev, or when a fabric netdev has an address but its RDMA device no RoCE v2 IPv4
// GID (FindGidIndex); the errors of BuildFabricPlan; a node's connection error (prefixed with
// it).
Result<ClusterChanges> PlanChanges(ssh::Transport& transport, const netplan::ClusterSpec& spec,
                                   const PlanOptions& options);

// NCCL_IB_GID_INDEX of a node: the RoCE v2 IPv4 GID index of its planned RDMA devices, found
// as preflight finds it (host::RdmaDeviceFacts::RoceV2Ipv4Index). `addressed`: the netdevs that
// carry an IPv4 address (the GID entry exists only then). Returns nullopt when no planned netdev
// is addressed yet; the index of the first device that has one otherwise (a note in *note when
// devices disagree). FailedPrecondition naming the node, device and netdev when an addressed
// netdev's device has no RoCE v2 IPv4 GID.
Result<std::optional<int>> FindGidIndex(const std::string& node,
                                        const std::vector<host::RdmaDeviceFacts>& rdma,
                                        const netplan::NodeAddressing& planned,
                                        const std::set<std::string>& addressed, std::string* note);

// Sets NCCL_IB_GID_INDEX in the node's plan (after NCCL_IB_HCA, as the netplan library places it)
// and clears gid_pending.
void SetGidIndex(NodeChanges* node, int index);

// Makes a WireGuard key on every node of `nodes` that has none (`wg genkey`, mode 0600, kept on
// the node). Errors of Run, or Aborted naming the node when wg fails.
Status EnsureWireGuardKeys(ssh::Transport& transport, const std::vector<std::string>& nodes);

// "spark-0 p0 twin a (enp1s0f0np0)".
std::string PortLabel(const std::string& node, int port, int twin, const std::string& netdev);

}  // namespace spark::fabric
