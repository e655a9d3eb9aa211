#include "sparkctl/fabric/fabric_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/logging.h"
#include "base/strings.h"
#include "sparkctl/fabric/roce_qos.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

// Stands in for a GID index not known yet (the entry appears with the fabric addresses); it is
// removed from the NCCL environment again (NodeChanges::gid_pending).
constexpr int kPlaceholderGid = 0;

// Stand-in keys for `net plan` before apply has made the real ones (unique per rank, as the
// library requires); never written anywhere.
std::string PlaceholderKey(int rank, bool is_public) {
  return std::string(42, 'A') + static_cast<char>('A' + 2 * rank + (is_public ? 1 : 0)) + "=";
}

Status CheckDiscovered(const netplan::ClusterSpec& spec) {
  bool ranked = !spec.nodes.empty();
  for (const auto& n : spec.nodes) ranked = ranked && n.rank.has_value();
  if (!ranked || !spec.fabric.kind) {
    return FailedPreconditionError(
        "the inventory has no " + std::string(ranked ? "fabric.kind" : "ranks") +
        ": run `sparkctl discover -c <cluster.yaml>` first to find the cabling");
  }
  return Status::Ok();
}

// A plan built with stand-in inputs: enough to know the sysctl keys and file paths to read.
Result<netplan::FabricPlan> SkeletonPlan(const netplan::ClusterSpec& spec,
                                         const PlanOptions& options) {
  netplan::PlanInputs inputs;
  inputs.control_plane = options.control_plane;
  for (const auto& n : spec.nodes) {
    inputs.nodes[n.name] = {kPlaceholderGid, "eth0", PlaceholderKey(*n.rank, false),
                            PlaceholderKey(*n.rank, true)};
  }
  return netplan::BuildFabricPlan(spec, inputs);
}

SnapshotRequest RequestFor(const netplan::NodePlan& plan) {
  SnapshotRequest r;
  for (const auto& s : plan.sysctls) r.sysctl_keys.push_back(s.key);
  for (const auto& f : netplan::NodeFiles(plan)) r.files.push_back(f.path);
  return r;
}

// WireGuard does not fail over between endpoints, so a fabric endpoint dies with its cable; the
// management LAN does not depend on any fabric cable, so the control plane survives one pulled.
void UseManagementEndpoints(const netplan::ClusterSpec& spec, netplan::NodePlan* plan) {
  if (!plan->wireguard) return;
  for (auto& peer : plan->wireguard->peers) {
    const auto* node = spec.FindNode(peer.name);
    peer.endpoint = node->address + ":" + std::to_string(spec.control_plane.port);
    peer.endpoint_on_fabric = false;
  }
}

void DiffFiles(NodeChanges* n) {
  for (const netplan::FileContent& f : netplan::NodeFiles(n->plan)) {
    auto it = n->before.files.find(f.path);
    std::string why;
    if (it == n->before.files.end()) {
      why = "missing";
    } else if (it->second.sha256 != Sha256Hex(f.content)) {
      why = "content differs";
    } else if (it->second.mode != f.mode) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "mode %o, want %o", it->second.mode, f.mode);
      why = buf;
    }
    if (!why.empty()) n->files.push_back({f, why});
  }
}

void DiffWireGuard(NodeChanges* n) {
  if (!n->plan.wireguard) return;
  const auto& wg = *n->plan.wireguard;
  const NetdevInfo* link = n->before.FindNetdev(wg.interface);
  bool has_address = false;
  if (link) {
    for (const auto& a : link->ipv4) has_address = has_address || a == wg.address;
  }
  if (!link) {
    n->wireguard_why = wg.interface + ": create (kernel WireGuard, else wireguard-go)";
  } else if (!link->up || !has_address) {
    n->wireguard_why = wg.interface + ": set up with " + wg.address.ToString();
  } else {
    for (const FileChange& f : n->files) {
      if (f.file.path == netplan::WireGuardConfPath(wg)) {
        n->wireguard_why = wg.interface + ": reload peers (`wg setconf`)";
      }
    }
  }
  n->wireguard = !n->wireguard_why.empty();
}

Result<NodeChanges> DiffNode(const netplan::ClusterSpec& spec, const netplan::NodePlan& plan,
                             const netplan::NodeSpec& node, NodeSnapshot snapshot) {
  NodeChanges n;
  n.node = node.name;
  n.management_address = node.address;
  n.plan = plan;
  n.before = std::move(snapshot);
  UseManagementEndpoints(spec, &n.plan);
  for (const auto& fi : plan.addressing.interfaces) {
    if (!n.before.FindNetdev(fi.netdev)) {
      return FailedPreconditionError(
          node.name + ": fabric netdev " + fi.netdev + " (" +
          PortLabel(node.name, fi.port, fi.twin, fi.netdev) +
          ") is missing: check that the ConnectX-7 driver (mlx5_core) is loaded, then re-run "
          "`sparkctl discover`");
    }
  }
  netplan::NodeState desired = netplan::DesiredState(n.plan);
  n.runtime = netplan::DiffState(ToNodeState(n.before, n.FabricNetdevs()), desired);
  DiffFiles(&n);
  DiffWireGuard(&n);
  return n;
}

}  // namespace

std::string PortLabel(const std::string& node, int port, int twin, const std::string& netdev) {
  return node + " p" + std::to_string(port) + " twin " + (twin == 0 ? "a" : "b") + " (" + netdev +
         ")";
}

std::set<std::string> NodeChanges::FabricNetdevs() const {
  std::set<std::string> out;
  for (const auto& fi : plan.addressing.interfaces) out.insert(fi.netdev);
  return out;
}

size_t ClusterChanges::Count() const {
  size_t total = 0;
  for (const auto& n : nodes) total += n.Count();
  return total;
}

const NodeChanges* ClusterChanges::Find(const std::string& node) const {
  for (const auto& n : nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

Result<std::optional<int>> FindGidIndex(const std::string& node,
                                        const std::vector<host::RdmaDeviceFacts>& rdma,
                                        const netplan::NodeAddressing& planned,
                                        const std::set<std::string>& addressed, std::string* note) {
  std::optional<int> found;
  std::vector<std::string> seen;
  bool differ = false;
  for (const netplan::FabricInterface& fi : planned.interfaces) {
    if (!addressed.count(fi.netdev)) continue;
    const host::RdmaDeviceFacts* dev = nullptr;
    for (const auto& d : rdma) {
      if (d.name == fi.rdma_device) dev = &d;
    }
    const std::optional<int> index = dev ? dev->RoceV2Ipv4Index() : std::nullopt;
    if (!index) {
      return FailedPreconditionError(
          node + ": no RoCE v2 IPv4 GID on " + fi.rdma_device + " (" + fi.netdev +
          " has an address), so NCCL_IB_GID_INDEX cannot be set: the netdev has an address but "
          "no RoCE v2 GID: check the RDMA driver (show_gids)");
    }
    seen.push_back(fi.rdma_device + "=" + std::to_string(*index));
    if (found && *found != *index) differ = true;
    if (!found) found = index;
  }
  if (differ && note) {
    *note = node + ": RoCE v2 GID indexes differ between devices (" + Join(seen, ", ") +
            "); NCCL_IB_GID_INDEX takes one value, " + std::to_string(*found) +
            " is used: re-run `sparkctl net apply` after reboots (the index moves)";
  }
  return found;
}

void SetGidIndex(NodeChanges* node, int index) {
  auto& env = node->plan.nccl_env;
  const netplan::EnvVar var{"NCCL_IB_GID_INDEX", std::to_string(index)};
  auto it = std::find_if(env.begin(), env.end(),
                         [](const netplan::EnvVar& v) { return v.name == "NCCL_IB_GID_INDEX"; });
  if (it != env.end()) {
    *it = var;
  } else {
    it = std::find_if(env.begin(), env.end(),
                      [](const netplan::EnvVar& v) { return v.name == "NCCL_IB_HCA"; });
    env.insert(it == env.end() ? env.end() : it + 1, var);
  }
  node->gid_pending = false;
}

Status EnsureWireGuardKeys(ssh::Transport& transport, const std::vector<std::string>& nodes) {
  std::string key = kWgKeyPath;
  std::string cmd = "umask 077 && mkdir -p " + std::string(kStateDir) + " && { [ -s " + key +
                    " ] || wg genkey > " + key + "; }";
  std::vector<ssh::NodeRun> runs = ssh::RunAll(transport, nodes, cmd);
  std::vector<Result<bool>> results;
  for (auto& r : runs) {
    if (!r.result.ok()) {
      results.push_back(r.result.status());
    } else if (!r.result->ok()) {
      results.push_back(ssh::CommandFailedError(r.node, cmd, *r.result)
                            .WithContext("cannot make a WireGuard key (is wireguard-tools "
                                         "installed? `apt install wireguard-tools`)"));
    } else {
      results.push_back(true);
    }
  }
  return ssh::JoinNodeErrors(results);
}

namespace {

// Switched fabrics: reads every node's lossless-RoCE settings (one round trip each).
Status ReadQos(ssh::Transport& transport, ClusterChanges* changes) {
  std::vector<std::string> names;
  for (const auto& n : changes->nodes) names.push_back(n.node);
  auto states = ssh::ForEachNode<std::vector<QosState>>(
      names, [&](const std::string& node) -> Result<std::vector<QosState>> {
        const NodeChanges* n = changes->Find(node);
        std::set<std::string> set = n->FabricNetdevs();
        std::vector<std::string> netdevs(set.begin(), set.end());
        SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                               ssh::RunChecked(transport, node, QosProbeCommand(netdevs)));
        return ParseQosProbe(netdevs, r.stdout_data);
      });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(states));
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<std::string> why;
    for (const QosState& q : *states[i]) {
      if (!q.ok()) why.push_back(q.netdev + ": " + q.Missing());
    }
    changes->nodes[i].qos = !why.empty();
    changes->nodes[i].qos_why = Join(why, "; ");
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterChanges> PlanChanges(ssh::Transport& transport, const netplan::ClusterSpec& spec,
                                   const PlanOptions& options) {
  SPARK_RETURN_IF_ERROR(CheckDiscovered(spec));
  SPARK_ASSIGN_OR_RETURN(netplan::FabricPlan skeleton, SkeletonPlan(spec, options));
  std::vector<std::string> names;
  for (const auto& n : skeleton.nodes) names.push_back(n.addressing.name);
  auto snapshots = ssh::ForEachNode<NodeSnapshot>(names, [&](const std::string& node)
                                                              -> Result<NodeSnapshot> {
    const netplan::NodePlan* plan = skeleton.FindNode(node);
    SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                           ssh::RunChecked(transport, node, SnapshotCommand(RequestFor(*plan))));
    Result<NodeSnapshot> s = ParseSnapshot(r.stdout_data);
    return s.ok() ? s : s.status().WithContext(node);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(snapshots));

  ClusterChanges out;
  out.spec = spec;
  netplan::PlanInputs inputs;
  inputs.control_plane = options.control_plane;
  const bool switched = spec.fabric.kind == netplan::TopologyKind::kSwitched;
  if (switched) inputs.nccl_ib_tc = kNcclIbTc;  // the lossless class that apply configures
  std::vector<std::string> keyless, gid_pending;
  for (size_t i = 0; i < names.size(); ++i) {
    const NodeSnapshot& s = *snapshots[i];
    const netplan::NodeSpec* node = spec.FindNode(names[i]);
    std::string mgmt_address = s.ssh_server_address.empty() ? node->address : s.ssh_server_address;
    netplan::NodeInputs in{kPlaceholderGid, s.NetdevWithAddress(mgmt_address), s.wg_private_key,
                           s.wg_public_key};
    if (in.management_interface.empty()) {
      return FailedPreconditionError(names[i] + ": no netdev carries the management address " +
                                     mgmt_address + "; check cluster.yaml's address for it");
    }
    for (const auto& fi : skeleton.FindNode(names[i])->addressing.interfaces) {
      if (fi.netdev == in.management_interface) {
        return FailedPreconditionError(
            names[i] + ": the management address " + mgmt_address + " is on fabric netdev " +
            fi.netdev + "; sparkctl never changes the management path: give the node a separate "
            "management interface (enP7s7 on DGX OS) and use its address in cluster.yaml");
      }
    }
    std::set<std::string> addressed;
    for (const NetdevInfo& d : s.netdevs) {
      if (!d.ipv4.empty()) addressed.insert(d.name);
    }
    std::string gid_note;
    SPARK_ASSIGN_OR_RETURN(std::optional<int> gid,
                           FindGidIndex(names[i], s.rdma, skeleton.FindNode(names[i])->addressing,
                                        addressed, &gid_note));
    if (!gid_note.empty()) out.notes.push_back(gid_note);
    if (gid) {
      in.gid_index = *gid;
    } else {
      gid_pending.push_back(names[i]);
    }
    if (in.wg_private_key.empty()) {
      keyless.push_back(names[i]);
      in.wg_private_key = PlaceholderKey(*node->rank, false);
      in.wg_public_key = PlaceholderKey(*node->rank, true);
    }
    inputs.nodes[names[i]] = in;
  }
  SPARK_ASSIGN_OR_RETURN(out.fabric, netplan::BuildFabricPlan(spec, inputs));
  for (size_t i = 0; i < names.size(); ++i) {
    SPARK_ASSIGN_OR_RETURN(NodeChanges n, DiffNode(spec, out.fabric.nodes[i],
                                                   *spec.FindNode(names[i]), *snapshots[i]));
    n.management_interface = inputs.nodes[names[i]].management_interface;
    n.needs_key = options.control_plane &&
                  std::find(keyless.begin(), keyless.end(), names[i]) != keyless.end();
    if (std::find(gid_pending.begin(), gid_pending.end(), names[i]) != gid_pending.end()) {
      n.gid_pending = true;
      std::erase_if(n.plan.nccl_env,
                    [](const netplan::EnvVar& v) { return v.name == "NCCL_IB_GID_INDEX"; });
    }
    out.fabric.nodes[i] = n.plan;
    out.nodes.push_back(std::move(n));
  }
  if (switched) SPARK_RETURN_IF_ERROR(ReadQos(transport, &out));
  if (!gid_pending.empty()) {
    out.notes.push_back("NCCL_IB_GID_INDEX of " + Join(gid_pending, ", ") +
                        " is read by apply: the RoCE v2 IPv4 GID appears only once the fabric "
                        "netdevs have their addresses");
  }
  if (!keyless.empty() && options.control_plane) {
    out.notes.push_back("WireGuard keys will be made by apply on " + Join(keyless, ", ") +
                        " (kept on the node in /etc/sparkctl/fabric; the controller reads a node's key only to "
                        "render that node's own files)");
  }
  return out;
}

}  // namespace spark::fabric
