#include "netplan/node_plan.h"

#include <set>

#include "base/strings.h"

namespace spark::netplan {
namespace {

bool IsInterfaceName(std::string_view name) {
  if (name.empty() || name.size() > 15) return false;
  for (char c : name) {
    if (c == '/' || c == ':' || c <= ' ' || c > '~') return false;
  }
  return true;
}

// A WireGuard key: base64 of 32 bytes, i.e. 43 base64 digits and one '='.
bool IsWireGuardKey(std::string_view key) {
  if (key.size() != 44 || key.back() != '=') return false;
  for (char c : key.substr(0, 43)) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/';
    if (!ok) return false;
  }
  return true;
}

void ValidateNodeInputs(const std::string& name, const NodeInputs& in, const PlanInputs& inputs,
                        FieldErrors* errors) {
  std::string path = "inputs.nodes[" + name + "]";
  if (in.gid_index < 0 || in.gid_index > 255) {
    errors->Add(path + ".gid_index", "RoCE v2 GID index unknown (" + std::to_string(in.gid_index) +
                                         "); run `sparkctl preflight` to read it from sysfs");
  }
  if (!IsInterfaceName(in.management_interface)) {
    errors->Add(path + ".management_interface",
                "'" + in.management_interface + "' is not a network interface name");
  }
  if (!inputs.control_plane) return;
  if (!IsWireGuardKey(in.wg_private_key)) {
    errors->Add(path + ".wg_private_key", "not a WireGuard key (44 base64 characters, `wg genkey`)");
  }
  if (!IsWireGuardKey(in.wg_public_key)) {
    errors->Add(path + ".wg_public_key", "not a WireGuard key (44 base64 characters, `wg pubkey`)");
  } else if (in.wg_public_key == in.wg_private_key) {
    errors->Add(path + ".wg_public_key", "equals the private key; derive it with `wg pubkey`");
  }
}

Status ValidateInputs(const AddressPlan& plan, const PlanInputs& inputs) {
  FieldErrors errors;
  if (inputs.control_plane && !IsInterfaceName(inputs.wg_interface)) {
    errors.Add("inputs.wg_interface", "'" + inputs.wg_interface +
                                          "' is not a valid interface name (1..15 characters)");
  }
  std::set<std::string> public_keys;
  for (const NodeAddressing& node : plan.nodes) {
    auto it = inputs.nodes.find(node.name);
    if (it == inputs.nodes.end()) {
      errors.Add("inputs.nodes[" + node.name + "]", "no facts for this node; run preflight");
      continue;
    }
    ValidateNodeInputs(node.name, it->second, inputs, &errors);
    if (inputs.control_plane && !public_keys.insert(it->second.wg_public_key).second) {
      errors.Add("inputs.nodes[" + node.name + "].wg_public_key", "used by another node too");
    }
  }
  return errors.ToStatus("plan inputs");
}

void AddDeviceSysctls(const NodePlan& plan, std::vector<Sysctl>* out) {
  bool routed = plan.kind == TopologyKind::kRing || plan.kind == TopologyKind::kLine;
  for (const FabricInterface& fi : plan.addressing.interfaces) {
    std::string prefix = "net.ipv4.conf." + fi.netdev + ".";
    if (routed) {
      out->push_back({prefix + "forwarding", "1", "forward for non-adjacent ranks"});
      out->push_back({prefix + "rp_filter", "0", "replies may arrive over the other side"});
    }
    if (plan.kind == TopologyKind::kRing) {
      out->push_back({prefix + "ignore_routes_with_linkdown", "1",
                      "routes over a pulled cable stop counting: the backup side takes over"});
    }
    if (plan.kind == TopologyKind::kSwitched) {
      out->push_back({prefix + "arp_ignore", "1", "answer ARP only on the rail owning the address"});
      out->push_back({prefix + "arp_announce", "2", "ARP requests use the rail's own address"});
    }
  }
}

std::vector<Sysctl> MakeSysctls(const NodePlan& plan) {
  std::vector<Sysctl> out;
  if (plan.kind == TopologyKind::kRing || plan.kind == TopologyKind::kLine) {
    out.push_back({"net.ipv4.ip_forward", "1", "this node routes between its neighbours"});
    out.push_back({"net.ipv4.conf.all.rp_filter", "0",
                   "the kernel applies max(all, <netdev>): 'all' must not re-enable it"});
  }
  AddDeviceSysctls(plan, &out);
  return out;
}

// The address a peer is reached at over a directly attached fabric link, if any.
std::optional<Ipv4> FabricEndpoint(const AddressPlan& plan, const NodeAddressing& self,
                                   int peer_rank) {
  if (plan.topology.kind == TopologyKind::kSwitched) {
    return plan.nodes[peer_rank].interfaces.front().address.ip;  // rail 0, same L2
  }
  for (const FabricInterface& fi : self.interfaces) {
    if (fi.peer_rank == peer_rank && fi.twin == 0) return fi.peer_address;
  }
  return std::nullopt;
}

Result<WireGuardPlan> MakeWireGuard(const ClusterSpec& spec, const AddressPlan& plan,
                                    const PlanInputs& inputs, const NodeAddressing& self) {
  SPARK_ASSIGN_OR_RETURN(Cidr control, Cidr::Parse(spec.control_plane.cidr));
  WireGuardPlan wg;
  wg.interface = inputs.wg_interface;
  wg.listen_port = spec.control_plane.port;
  wg.private_key = inputs.nodes.at(self.name).wg_private_key;
  wg.address = InterfaceAddress{control.Host(self.rank + 1), control.prefix};
  wg.keepalive_s = inputs.wg_keepalive_s;
  std::string port = ":" + std::to_string(spec.control_plane.port);
  for (const NodeAddressing& peer : plan.nodes) {
    if (peer.rank == self.rank) continue;
    std::optional<Ipv4> fabric = FabricEndpoint(plan, self, peer.rank);
    std::string host = fabric ? fabric->ToString() : spec.FindNode(peer.name)->address;
    wg.peers.push_back(WireGuardPeer{peer.name, inputs.nodes.at(peer.name).wg_public_key,
                                     host + port, fabric.has_value(),
                                     Cidr{control.Host(peer.rank + 1), 32}});
  }
  return wg;
}

std::vector<EnvVar> MakeNcclEnv(const NodePlan& plan, const PlanInputs& inputs) {
  const NodeInputs& in = inputs.nodes.at(plan.addressing.name);
  std::string socket_if =
      inputs.nccl_socket_on_control_plane ? inputs.wg_interface : in.management_interface;
  std::vector<EnvVar> env = {
      {"NCCL_SOCKET_IFNAME", "=" + socket_if},
      {"NCCL_IB_HCA", "=" + Join(IbDevices(plan.addressing), ",")},
      {"NCCL_IB_GID_INDEX", std::to_string(in.gid_index)},
      {"NCCL_NET", "IB"},
      {"NCCL_IB_DISABLE", "0"},
  };
  if (plan.kind == TopologyKind::kRing || plan.kind == TopologyKind::kLine) {
    env.push_back({"NCCL_ALGO", "Ring"});
    env.push_back({"NCCL_IB_SUBNET_AWARE_ROUTING", "1"});
    env.push_back({"NCCL_IB_MERGE_NICS", "0"});
    env.push_back({"NCCL_CROSS_NIC", "1"});
  }
  if (plan.kind == TopologyKind::kSwitched && inputs.nccl_ib_tc) {
    env.push_back({"NCCL_IB_TC", std::to_string(*inputs.nccl_ib_tc)});
  }
  // Read by the Spark tuner plugin (nccl-patches/) when NCCL_TUNER_PLUGIN loads it; inert
  // otherwise.
  env.push_back({"SPARK_NCCL_TOPOLOGY", std::string(TopologyName(plan.kind))});
  return env;
}

}  // namespace

std::string NodePlan::Env(std::string_view name) const {
  for (const EnvVar& var : nccl_env) {
    if (var.name == name) return var.value;
  }
  return "";
}

const NodePlan* FabricPlan::FindNode(std::string_view name) const {
  for (const NodePlan& node : nodes) {
    if (node.addressing.name == name) return &node;
  }
  return nullptr;
}

std::vector<std::string> IbDevices(const NodeAddressing& node) {
  std::vector<std::string> devices;
  for (const FabricInterface& fi : node.interfaces) devices.push_back(fi.rdma_device);
  return devices;
}

Result<FabricPlan> BuildFabricPlan(const ClusterSpec& spec, const PlanInputs& inputs) {
  FabricPlan plan;
  AddressOptions options;
  options.switched_ports = inputs.switched_ports;
  SPARK_ASSIGN_OR_RETURN(plan.addresses, BuildAddressPlan(spec, options));
  SPARK_RETURN_IF_ERROR(ValidateInputs(plan.addresses, inputs));
  for (const NodeAddressing& addressing : plan.addresses.nodes) {
    NodePlan node;
    node.cluster = spec.name;
    node.kind = plan.addresses.topology.kind;
    node.mtu = spec.fabric.mtu;
    node.addressing = addressing;
    node.sysctls = MakeSysctls(node);
    if (inputs.control_plane) {
      SPARK_ASSIGN_OR_RETURN(node.wireguard,
                             MakeWireGuard(spec, plan.addresses, inputs, addressing));
    }
    node.nccl_env = MakeNcclEnv(node, inputs);
    plan.nodes.push_back(std::move(node));
  }
  return plan;
}

}  // namespace spark::netplan
