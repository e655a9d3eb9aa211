// Which network the cluster's control traffic uses: the engine's rendezvous, Gloo, NCCL's
// bootstrap sockets and the all-reduce of `sparkctl selftest`. The WireGuard control plane that
// `sparkctl net apply` brings up (docs/netplan.md) is used when every node's tunnel is up and
// every node reaches every other node's tunnel address; otherwise the control traffic falls
// back to the plaintext management LAN and the reason is reported as a warning (never
// silently). All nodes use the same network: a rendezvous address half the nodes cannot reach
// would hang the group.
//
// The tunnel's peers are each other's management addresses (fabric/apply.cc), so it does not
// depend on any fabric cable: a pulled cable leaves the control traffic where it is.
// The controller's own traffic (SSH to the nodes, the monitor's probes) stays on SSH to the
// management addresses: the controller is not a WireGuard peer, and SSH is already encrypted
// and authenticated.
// Thread-safety: functions; ProbeControlPlane runs one SSH command per node in parallel.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/node_plan.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {

// What one node saw of its tunnel.
struct ControlPlaneProbe {
  std::string node;
  Status status;                      // the SSH command itself (Unavailable when unreachable)
  bool interface_up = false;          // the tunnel netdev is up and carries its address
  std::map<std::string, bool> peers;  // peer tunnel address -> answered a ping
};

struct ControlPlane {
  bool wireguard = false;
  std::string interface;                         // the tunnel netdev, when wireguard
  std::map<std::string, std::string> addresses;  // node -> address its control traffic uses
  std::string reason;  // why the management LAN is used (empty when wireguard)

  // "WireGuard (sparkctl-wg0)" or "management LAN: <reason>".
  std::string Describe() const;
  // `env` with NCCL_SOCKET_IFNAME pointed at the tunnel when wireguard (unchanged otherwise).
  std::vector<netplan::EnvVar> Env(std::vector<netplan::EnvVar> env) const;
};

// The shell command that probes `own` (the node's planned tunnel) and pings `peers` (the other
// nodes' tunnel addresses), all pings at once. Its output is read by ParseControlProbe.
std::string ControlProbeCommand(const netplan::WireGuardPlan& own,
                                const std::vector<std::string>& peers);
ControlPlaneProbe ParseControlProbe(const std::string& node, const std::string& output);

// Pure: WireGuard when the plan has a tunnel on every node and every probe is clean; the
// management addresses otherwise, with a reason naming the node, the peer and the fix.
ControlPlane DecideControlPlane(const ClusterChanges& changes,
                                const std::vector<ControlPlaneProbe>& probes);

// Probes every node of `changes` (one SSH round trip each, in parallel) and decides.
ControlPlane ProbeControlPlane(ssh::Transport& transport, const ClusterChanges& changes);

}  // namespace spark::fabric
