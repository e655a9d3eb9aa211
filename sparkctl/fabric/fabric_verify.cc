#include "sparkctl/fabric/fabric_verify.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

using netplan::FabricInterface;
using netplan::NodePlan;

struct Probe {
  std::string kind;  // reach, df, wg
  std::string dev;   // df only
  std::string address;
};

struct NodeProbes {
  std::vector<Probe> pings;
  std::vector<const netplan::Route*> routes;  // primaries to check with `ip route get`
  std::vector<const FabricInterface*> hops;   // (interface, neighbour) pairs for next-hop
};

const FabricInterface* InterfaceOnSubnet(const NodePlan& plan, int subnet_index) {
  for (const auto& fi : plan.addressing.interfaces) {
    if (fi.subnet_index == subnet_index) return &fi;
  }
  return nullptr;
}

// The neighbour address a df ping / next-hop check of `fi` goes to.
std::optional<netplan::Ipv4> NeighbourOf(const ClusterChanges& c, const NodePlan& plan,
                                         const FabricInterface& fi) {
  if (fi.peer_address) return fi.peer_address;
  if (c.fabric.nodes.size() < 2) return std::nullopt;
  const NodePlan& next = c.fabric.nodes[(plan.addressing.rank + 1) % c.fabric.nodes.size()];
  const FabricInterface* other = InterfaceOnSubnet(next, fi.subnet_index);
  return other ? std::optional(other->address.ip) : std::nullopt;
}

NodeProbes ProbesFor(const ClusterChanges& c, const NodePlan& plan, bool wireguard) {
  NodeProbes p;
  for (const NodePlan& other : c.fabric.nodes) {
    if (other.addressing.rank == plan.addressing.rank) continue;
    for (const auto& fi : other.addressing.interfaces) {
      p.pings.push_back({"reach", "", fi.address.ip.ToString()});
    }
    if (wireguard && other.wireguard && plan.wireguard) {
      p.pings.push_back({"wireguard", "", other.wireguard->address.ip.ToString()});
    }
  }
  for (const auto& fi : plan.addressing.interfaces) {
    auto peer = NeighbourOf(c, plan, fi);
    if (!peer) continue;
    p.pings.push_back({"df", fi.netdev, peer->ToString()});
    p.hops.push_back(&fi);
  }
  for (const auto& r : plan.addressing.routes) {
    if (r.metric == netplan::kPrimaryRouteMetric) p.routes.push_back(&r);
  }
  return p;
}

std::string Script(const NodeProbes& p, const NodePlan& plan) {
  int df_size = plan.mtu - 28;
  std::string s =
      "export LC_ALL=C\n"
      "p() { if ping -n -q -c 1 -W \"$3\" $4 \"$2\" >/dev/null 2>&1; then echo \"$1 $2 ok\"; "
      "else echo \"$1 $2 fail\"; fi; }\n";
  for (const Probe& pr : p.pings) {
    if (pr.kind == "df") {
      s += "p df:" + pr.dev + " " + pr.address + " 1 '-M do -s " + std::to_string(df_size) +
           " -I " + pr.dev + "' &\n";
    } else {
      s += "p " + pr.kind + " " + pr.address + (pr.kind == "wireguard" ? " 2" : " 1") + " '' &\n";
    }
  }
  s += "wait\n";
  for (const auto* r : p.routes) {
    std::string probe = r->to.Host(1).ToString();
    s += "echo \"routeget " + probe + " $(ip -o route get " + probe + " 2>&1 | head -n 1)\"\n";
  }
  for (const auto& fi : plan.addressing.interfaces) {
    s += "echo \"link " + fi.netdev + " $(cat /sys/class/net/" + fi.netdev + "/operstate)\"\n";
  }
  s += "echo @@neigh\nip -j -4 neigh show\n";
  return s;
}

std::string Word(const std::vector<std::string>& words, const std::string& key) {
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == key) return words[i + 1];
  }
  return "";
}

// The node and netdev holding `ip` in the plan, or nullptr.
const NodeChanges* Owner(const ClusterChanges& c, netplan::Ipv4 ip, const FabricInterface** out) {
  for (const auto& n : c.nodes) {
    for (const auto& fi : n.plan.addressing.interfaces) {
      if (fi.address.ip == ip) {
        *out = &fi;
        return &n;
      }
    }
  }
  return nullptr;
}

std::string ReachCable(const ClusterChanges& c, const NodePlan& plan, netplan::Ipv4 target) {
  for (const auto& fi : plan.addressing.interfaces) {
    if (fi.address.Subnet().Contains(target)) return CableLabel(c, plan.addressing.name, fi.netdev);
  }
  for (const auto& r : plan.addressing.routes) {
    if (r.metric == netplan::kPrimaryRouteMetric && r.to.Contains(target)) {
      return CableLabel(c, plan.addressing.name, r.dev) + " (first hop; the break may be further)";
    }
  }
  return "";
}

void Evaluate(const ClusterChanges& c, const NodeChanges& self, const NodeProbes& probes,
              const std::string& out, std::vector<VerifyCheck>* checks) {
  const NodePlan& plan = self.plan;
  const std::string& node = self.node;
  size_t neigh_at = out.find("@@neigh\n");
  std::string lines = out.substr(0, neigh_at);
  nlohmann::json neigh = nlohmann::json::array();
  if (neigh_at != std::string::npos) {
    neigh = nlohmann::json::parse(out.substr(neigh_at + 8), nullptr, false);
    if (neigh.is_discarded()) neigh = nlohmann::json::array();
  }
  std::map<std::string, std::string> route_get;
  for (const std::string& line : Split(lines, '\n', true)) {
    std::vector<std::string> w = Split(line, ' ', true);
    if (w.size() < 3) continue;
    if (w[0] == "routeget") {
      route_get[w[1]] = line;
    } else if (w[0] == "link") {
      bool up = w[2] == "up";
      checks->push_back({node, "link", w[1], up, up ? "" : "no carrier (operstate " + w[2] + ")",
                         CableLabel(c, node, w[1])});
    } else if (w[0].starts_with("df:")) {
      std::string dev = w[0].substr(3);
      bool ok = w[2] == "ok";
      checks->push_back({node, "df", dev + " -> " + w[1], ok,
                         ok ? "" : "no reply to a " + std::to_string(plan.mtu - 28) +
                                       "-byte don't-fragment ping: MTU below " +
                                       std::to_string(plan.mtu) + " on the path, or no link",
                         CableLabel(c, node, dev)});
    } else {
      bool ok = w[2] == "ok";
      auto ip = netplan::Ipv4::Parse(w[1]);
      std::string what;
      if (!ok && ip) {
        const FabricInterface* fi = nullptr;
        const NodeChanges* owner = Owner(c, *ip, &fi);
        what = "no reply" + (owner ? " from " + PortLabel(owner->node, fi->port, fi->twin,
                                                          fi->netdev) : std::string());
      } else if (!ok) {
        what = "no reply over the WireGuard control plane";
      }
      checks->push_back({node, w[0], w[1], ok, what,
                         ok || !ip || w[0] != "reach" ? "" : ReachCable(c, plan, *ip)});
    }
  }
  for (const auto* r : probes.routes) {
    std::string probe = r->to.Host(1).ToString();
    std::vector<std::string> w = Split(route_get[probe], ' ', true);
    std::string via = Word(w, "via"), dev = Word(w, "dev");
    bool ok = via == r->via.ToString() && dev == r->dev;
    std::string detail =
        ok ? "" : "kernel uses " + (via.empty() ? std::string("no gateway") : "via " + via) +
                      " dev " + dev + ", planned via " + r->via.ToString() + " dev " + r->dev +
                      " (the backup route is in use when the primary cable is down)";
    checks->push_back({node, "route", r->to.ToString(), ok, detail, CableLabel(c, node, r->dev)});
  }
  for (const FabricInterface* fi : probes.hops) {
    auto peer = NeighbourOf(c, plan, *fi);
    const FabricInterface* pfi = nullptr;
    const NodeChanges* owner = Owner(c, *peer, &pfi);
    if (!owner) continue;
    const NetdevInfo* want = owner->before.FindNetdev(pfi->netdev);
    std::string seen;
    for (const auto& e : neigh) {
      if (e.value("dst", "") == peer->ToString() && e.value("dev", "") == fi->netdev)
        seen = e.value("lladdr", "");
    }
    bool ok = want && !seen.empty() && seen == want->mac;
    std::string detail;
    if (seen.empty()) {
      detail = "no ARP answer from " + peer->ToString();
    } else if (!ok) {
      detail = peer->ToString() + " answers with MAC " + seen + ", but " +
               PortLabel(owner->node, pfi->port, pfi->twin, pfi->netdev) + " has " +
               (want ? want->mac : "?") + ": the cable or its twins are crossed";
    }
    checks->push_back({node, "next-hop", fi->netdev + " -> " + peer->ToString(), ok, detail,
                       CableLabel(c, node, fi->netdev)});
  }
}

}  // namespace

std::string CableLabel(const ClusterChanges& c, const std::string& node,
                       const std::string& netdev) {
  const NodeChanges* self = c.Find(node);
  if (!self) return "";
  for (const auto& fi : self->plan.addressing.interfaces) {
    if (fi.netdev != netdev) continue;
    std::string here = PortLabel(node, fi.port, fi.twin, fi.netdev);
    if (!fi.peer_rank) return "rail " + std::to_string(fi.subnet_index) + ": " + here + " <-> switch";
    const NodePlan& peer = c.fabric.nodes[*fi.peer_rank];
    const FabricInterface* pfi = InterfaceOnSubnet(peer, fi.subnet_index);
    std::string there = pfi ? PortLabel(peer.addressing.name, pfi->port, pfi->twin, pfi->netdev)
                            : peer.addressing.name;
    // Canonical order (the .1 end first) so both ends name the cable the same way.
    if (pfi && pfi->address.ip < fi.address.ip) std::swap(here, there);
    return "cable " + std::to_string(fi.subnet_index / 2) + ": " + here + " <-> " + there;
  }
  return "";
}

size_t VerifyReport::Failures() const {
  size_t n = 0;
  for (const auto& c : checks) n += c.ok ? 0 : 1;
  return n;
}

std::string VerifyReport::Summary() const {
  std::string out;
  for (const auto& c : checks) {
    if (c.ok) continue;
    out += "FAIL " + c.node + " " + c.kind + " " + c.target + ": " + c.detail +
           (c.cable.empty() ? "" : " [" + c.cable + "]") + "\n";
  }
  for (const auto& cable : suspect_cables) out += "check " + cable + "\n";
  return out;
}

Result<VerifyReport> VerifyCluster(ssh::Transport& transport, const ClusterChanges& changes,
                                   const VerifyOptions& options) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> names;
  std::vector<NodeProbes> probes;
  for (const auto& n : changes.nodes) {
    names.push_back(n.node);
    probes.push_back(ProbesFor(changes, n.plan, options.wireguard));
  }
  auto outputs = ssh::ForEachNode<std::string>(names, [&](const std::string& node)
                                                           -> Result<std::string> {
    size_t i = std::find(names.begin(), names.end(), node) - names.begin();
    ssh::RunOptions run;
    run.stdin_data = Script(probes[i], changes.nodes[i].plan);
    SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                           ssh::RunChecked(transport, node, "/bin/sh -s", run));
    return r.stdout_data;
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(outputs));
  VerifyReport report;
  for (size_t i = 0; i < names.size(); ++i) {
    Evaluate(changes, changes.nodes[i], probes[i], *outputs[i], &report.checks);
  }
  std::set<std::string> suspects;
  for (const auto& c : report.checks) {
    if (!c.ok && !c.cable.empty() && (c.kind == "link" || c.kind == "df" || c.kind == "next-hop"))
      suspects.insert(c.cable);
  }
  report.suspect_cables.assign(suspects.begin(), suspects.end());
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace spark::fabric
