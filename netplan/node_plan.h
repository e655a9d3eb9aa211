// FabricPlan: the complete desired fabric state of every node, derived from a ClusterSpec and
// PlanInputs: addresses and routes (address_plan.h), sysctls, the WireGuard control plane and
// the NCCL environment of each rank. render.h turns a NodePlan into files and commands.
//
// Pure; no I/O. Thread-safety: values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/address_plan.h"
#include "netplan/cluster_spec.h"
#include "netplan/plan_inputs.h"

namespace spark::netplan {

struct Sysctl {
  std::string key;  // "net.ipv4.conf.enp1s0f0np0.rp_filter"
  std::string value;
  std::string why;  // one line, written as a comment next to the key
};

struct WireGuardPeer {
  std::string name;  // node name, for comments
  std::string public_key;
  std::string endpoint;     // "198.18.0.2:51871" (fabric, adjacent) or "<management>:51871"
  bool endpoint_on_fabric;  // true when the endpoint is an address of a directly attached link
  Cidr allowed_ip;          // the peer's control-plane address as a /32
};

struct WireGuardPlan {
  std::string interface;
  int listen_port = 0;
  std::string private_key;
  InterfaceAddress address;  // host rank+1 of control_plane.cidr
  int keepalive_s = 0;
  std::vector<WireGuardPeer> peers;  // by rank
};

struct EnvVar {
  std::string name;
  std::string value;
  friend bool operator==(const EnvVar&, const EnvVar&) = default;
};

struct NodePlan {
  std::string cluster;
  TopologyKind kind = TopologyKind::kRing;
  int mtu = 9000;
  NodeAddressing addressing;
  std::vector<Sysctl> sysctls;           // in the order they must be applied
  std::optional<WireGuardPlan> wireguard;  // empty when PlanInputs::control_plane is off
  std::vector<EnvVar> nccl_env;

  // The NCCL variable's value, or "" when not set.
  std::string Env(std::string_view name) const;
};

struct FabricPlan {
  AddressPlan addresses;
  std::vector<NodePlan> nodes;  // by rank

  const NodePlan* FindNode(std::string_view name) const;
};

// Errors: those of BuildAddressPlan(); InvalidArgument naming each node whose inputs are missing
// or malformed (GID index, management interface, WireGuard keys), or a bad wg_interface name.
Result<FabricPlan> BuildFabricPlan(const ClusterSpec& spec, const PlanInputs& inputs);

// The RDMA devices NCCL_IB_HCA lists for a node: both twins of every port with an address, in
// kPortTwins order.
std::vector<std::string> IbDevices(const NodeAddressing& node);

}  // namespace spark::netplan
