#include "sparkctl/fabric/fabric_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/logging.h"
#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

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
    inputs.nodes[n.name] = {options.gid_index, "eth0", PlaceholderKey(*n.rank, false),
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
  std::vector<std::string> keyless;
  for (size_t i = 0; i < names.size(); ++i) {
    const NodeSnapshot& s = *snapshots[i];
    const netplan::NodeSpec* node = spec.FindNode(names[i]);
    std::string mgmt_address = s.ssh_server_address.empty() ? node->address : s.ssh_server_address;
    netplan::NodeInputs in{options.gid_index, s.NetdevWithAddress(mgmt_address), s.wg_private_key,
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
    out.fabric.nodes[i] = n.plan;
    out.nodes.push_back(std::move(n));
  }
  out.notes.push_back("NCCL_IB_GID_INDEX=" + std::to_string(options.gid_index) +
                      " is assumed (host facts are not wired into the plan yet); check it with "
                      "`show_gids` on each node");
  if (!keyless.empty() && options.control_plane) {
    out.notes.push_back("WireGuard keys will be made by apply on " + Join(keyless, ", ") +
                        " (kept on the node in /etc/sparkctl/fabric; the controller reads a node's key only to "
                        "render that node's own files)");
  }
  return out;
}

}  // namespace spark::fabric
