#include "netplan/cluster_spec.h"

#include <map>
#include <set>

#include "netplan/ipv4.h"

namespace spark::netplan {
namespace {

std::string Idx(const std::string& list, size_t i) { return list + "[" + std::to_string(i) + "]"; }

bool IsHostnameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

bool IsHostname(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '-' || s.front() == '.') return false;
  bool has_letter = false;
  for (char c : s) {
    if (!IsHostnameChar(c)) return false;
    has_letter = has_letter || ((c < '0' || c > '9') && c != '.');
  }
  // All digits and dots is a (possibly malformed) IPv4 address, never a host name.
  return has_letter;
}

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckRange(const std::string& path, int value, int lo, int hi, FieldErrors* errors) {
  if (value < lo || value > hi) {
    errors->Add(path, std::to_string(value) + " is out of range (" + std::to_string(lo) + ".." +
                          std::to_string(hi) + ")");
  }
}

void ValidateSsh(const SshSpec& ssh, FieldErrors* errors) {
  if (ssh.user.empty()) errors->Add("ssh.user", "must not be empty");
  CheckRange("ssh.port", ssh.port, 1, 65535, errors);
  CheckRange("ssh.connect_timeout_s", ssh.connect_timeout_s, 1, 600, errors);
  CheckRange("ssh.command_timeout_s", ssh.command_timeout_s, 1, 86400, errors);
}

void ValidatePorts(const ClusterSpec& spec, size_t n, FieldErrors* errors) {
  const NodeSpec& node = spec.nodes[n];
  std::set<std::string> seen;
  for (size_t p = 0; p < node.ports.size(); ++p) {
    const PortSpec& port = node.ports[p];
    std::string path = Idx(Idx("nodes", n) + ".ports", p);
    if (port.name != "p0" && port.name != "p1") {
      errors->Add(path + ".name", "'" + port.name + "' is not a port of a DGX Spark (p0 or p1)");
      continue;
    }
    if (!seen.insert(port.name).second) errors->Add(path + ".name", "port listed twice");
    if (!port.peer) continue;
    const NodeSpec* peer = spec.FindNode(port.peer->node);
    if (!peer) {
      errors->Add(path + ".peer.node", "no node named '" + port.peer->node + "' in this inventory");
      continue;
    }
    if (peer->name == node.name) {
      errors->Add(path + ".peer.node", "a port cannot be cabled to its own node");
      continue;
    }
    if (port.peer->port != "p0" && port.peer->port != "p1") {
      errors->Add(path + ".peer.port", "'" + port.peer->port + "' is not a port (p0 or p1)");
      continue;
    }
    bool symmetric = false;
    for (const PortSpec& back : peer->ports) {
      if (back.name == port.peer->port && back.peer && back.peer->node == node.name &&
          back.peer->port == port.name) {
        symmetric = true;
      }
    }
    if (!symmetric) {
      errors->Add(path + ".peer", node.name + " " + port.name + " is cabled to " + peer->name + " " +
                                      port.peer->port + ", but " + peer->name + " " +
                                      port.peer->port + " does not list " + node.name + " " +
                                      port.name + " as its peer");
    }
  }
}

void ValidateNodes(const ClusterSpec& spec, FieldErrors* errors) {
  if (spec.nodes.empty()) {
    errors->Add("nodes", "at least one node is required");
    return;
  }
  std::map<std::string, size_t> names, addresses, machine_ids;
  std::map<int, size_t> ranks;
  size_t with_rank = 0;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& node = spec.nodes[i];
    std::string path = Idx("nodes", i);
    if (!IsHostname(node.name)) {
      errors->Add(path + ".name", "'" + node.name + "' is not a valid host name");
    } else if (auto [it, fresh] = names.emplace(node.name, i); !fresh) {
      errors->Add(path + ".name", "duplicate node name (also nodes[" + std::to_string(it->second) + "])");
    }
    if (!Ipv4::Parse(node.address) && !IsHostname(node.address)) {
      errors->Add(path + ".address", "'" + node.address + "' is neither an IPv4 address nor a host name");
    } else if (auto [it, fresh] = addresses.emplace(node.address, i); !fresh) {
      errors->Add(path + ".address", "address also used by " + spec.nodes[it->second].name);
    }
    if (!node.machine_id.empty()) {
      if (node.machine_id.size() != 32 || !IsHex(node.machine_id)) {
        errors->Add(path + ".machine_id", "expected 32 lowercase hex digits (as in /etc/machine-id)");
      } else if (auto [it, fresh] = machine_ids.emplace(node.machine_id, i); !fresh) {
        errors->Add(path + ".machine_id",
                    "same machine-id as " + spec.nodes[it->second].name +
                        " (nodes flashed from one image); on one of them run: rm /etc/machine-id && "
                        "systemd-machine-id-setup");
      }
    }
    if (node.rank) {
      ++with_rank;
      CheckRange(path + ".rank", *node.rank, 0, static_cast<int>(spec.nodes.size()) - 1, errors);
      if (auto [it, fresh] = ranks.emplace(*node.rank, i); !fresh) {
        errors->Add(path + ".rank", "rank " + std::to_string(*node.rank) + " also given to " +
                                        spec.nodes[it->second].name);
      }
    }
    ValidatePorts(spec, i, errors);
  }
  if (with_rank != 0 && with_rank != spec.nodes.size()) {
    errors->Add("nodes", "either every node has a rank or none does (" + std::to_string(with_rank) +
                             " of " + std::to_string(spec.nodes.size()) + " have one)");
  }
}

void ValidateNetworks(const ClusterSpec& spec, FieldErrors* errors) {
  auto fabric = Cidr::Parse(EffectiveFabricCidr(spec));
  if (!fabric.ok()) errors->Add("fabric.cidr", fabric.status().message());
  CheckRange("fabric.mtu", spec.fabric.mtu, 1280, 9216, errors);
  int n = static_cast<int>(spec.nodes.size());
  if (spec.fabric.kind) {
    TopologyKind kind = *spec.fabric.kind;
    if (n < MinNodes(kind) || n > MaxNodes(kind)) {
      errors->Add("fabric.kind", std::string(TopologyName(kind)) + " needs " +
                                     std::to_string(MinNodes(kind)) + ".." +
                                     std::to_string(MaxNodes(kind)) + " nodes, the inventory has " +
                                     std::to_string(n));
    } else if (fabric.ok()) {
      int need = RequiredFabricPrefix(kind, spec.CableCount());
      if (fabric->prefix > need) {
        errors->Add("fabric.cidr", fabric->ToString() + " is too small for " + std::to_string(n) +
                                       " nodes in a " + std::string(TopologyName(kind)) +
                                       "; use a /" + std::to_string(need) + " or larger");
      }
    }
  }
  auto control = Cidr::Parse(spec.control_plane.cidr);
  if (!control.ok()) {
    errors->Add("control_plane.cidr", control.status().message());
  } else {
    if (control->size() < static_cast<uint64_t>(n) + 2) {
      errors->Add("control_plane.cidr", control->ToString() + " holds " +
                                            std::to_string(control->size() - 2) +
                                            " hosts, fewer than the " + std::to_string(n) + " nodes");
    }
    if (fabric.ok() && control->Overlaps(*fabric)) {
      errors->Add("control_plane.cidr", "overlaps fabric.cidr " + fabric->ToString());
    }
  }
  CheckRange("control_plane.port", spec.control_plane.port, 1, 65535, errors);
}

}  // namespace

std::string_view TopologyName(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kSingle: return "single";
    case TopologyKind::kPair: return "pair";
    case TopologyKind::kRing: return "ring";
    case TopologyKind::kLine: return "line";
    case TopologyKind::kSwitched: return "switched";
  }
  return "?";
}

std::optional<TopologyKind> ParseTopology(std::string_view name) {
  for (auto kind : {TopologyKind::kSingle, TopologyKind::kPair, TopologyKind::kRing,
                    TopologyKind::kLine, TopologyKind::kSwitched}) {
    if (TopologyName(kind) == name) return kind;
  }
  return std::nullopt;
}

int MinNodes(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kSingle: return 1;
    case TopologyKind::kPair: return 2;
    case TopologyKind::kRing: return 3;
    default: return 2;
  }
}

int MaxNodes(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kSingle: return 1;
    case TopologyKind::kPair: return 2;
    default: return 8;
  }
}

const NodeSpec* ClusterSpec::FindNode(std::string_view node_name) const {
  for (const NodeSpec& node : nodes) {
    if (node.name == node_name) return &node;
  }
  return nullptr;
}

int ClusterSpec::CableCount() const {
  int n = static_cast<int>(nodes.size());
  if (!fabric.kind) return 0;
  switch (*fabric.kind) {
    case TopologyKind::kSingle: return 0;
    case TopologyKind::kPair: return 1;
    case TopologyKind::kRing: return n;
    case TopologyKind::kLine: return n - 1;
    case TopologyKind::kSwitched: return n;
  }
  return 0;
}

int RequiredFabricPrefix(TopologyKind kind, int cables) {
  // Switched: one /24 per rail (2 ports x 2 twins). Point-to-point: two /24 per cable.
  int subnets = kind == TopologyKind::kSwitched ? 4 : 2 * cables;
  int bits = 0;
  while ((1 << bits) < subnets) ++bits;
  return 24 - bits;
}

std::string EffectiveFabricCidr(const ClusterSpec& spec) {
  if (spec.fabric.cidr != kDefaultFabricCidr || !spec.fabric.kind) return spec.fabric.cidr;
  int need = RequiredFabricPrefix(*spec.fabric.kind, spec.CableCount());
  return need < 21 ? "198.18.0.0/" + std::to_string(need) : spec.fabric.cidr;
}

void Validate(const ClusterSpec& spec, FieldErrors* errors) {
  if (spec.schema != kClusterSchema) {
    errors->Add("schema", "unsupported schema '" + spec.schema + "'; this sparkctl reads " +
                              std::string(kClusterSchema));
  }
  if (spec.name.empty() || !IsHostname(spec.name)) {
    errors->Add("name", "'" + spec.name + "' is not a valid cluster name (letters, digits, - _ .)");
  }
  ValidateSsh(spec.ssh, errors);
  ValidateNodes(spec, errors);
  ValidateNetworks(spec, errors);
}

}  // namespace spark::netplan
