#include "sparkctl/fabric/control_plane.h"

#include <algorithm>
#include <sstream>

#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

constexpr char kFix[] =
    "check the tunnel with `sparkctl net verify`, bring it back with `sparkctl net apply`";

ControlPlane Management(const ClusterChanges& changes, std::string reason) {
  ControlPlane c;
  c.reason = std::move(reason);
  for (const auto& n : changes.nodes) c.addresses[n.node] = n.management_address;
  return c;
}

}  // namespace

std::string ControlPlane::Describe() const {
  return wireguard ? "WireGuard (" + interface + ")" : "management LAN: " + reason;
}

std::vector<netplan::EnvVar> ControlPlane::Env(std::vector<netplan::EnvVar> env) const {
  if (!wireguard) return env;
  for (auto& e : env) {
    if (e.name == "NCCL_SOCKET_IFNAME") e.value = "=" + interface;
  }
  return env;
}

std::string ControlProbeCommand(const netplan::WireGuardPlan& own,
                                const std::vector<std::string>& peers) {
  // `ip addr show up` lists the address only while the netdev is up. Two pings 0.2 s apart: the
  // first may wait for the WireGuard handshake.
  std::string c = "if ip -4 -o addr show dev " + ssh::ShellQuote(own.interface) +
                  " up 2>/dev/null | grep -qF ' inet " + own.address.ToString() +
                  " '; then echo '@@if up'; else echo '@@if down'; fi; ";
  for (const auto& p : peers) {
    c += "(if ping -n -q -c 2 -i 0.2 -W 1 " + p + " >/dev/null 2>&1; then echo '@@peer " + p +
         " ok'; else echo '@@peer " + p + " fail'; fi) & ";
  }
  return c + "wait";
}

ControlPlaneProbe ParseControlProbe(const std::string& node, const std::string& output) {
  ControlPlaneProbe p{.node = node};
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "@@if up") p.interface_up = true;
    if (line.rfind("@@peer ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string address, verdict;
    words >> address >> verdict;
    p.peers[address] = verdict == "ok";
  }
  return p;
}

ControlPlane DecideControlPlane(const ClusterChanges& changes,
                                const std::vector<ControlPlaneProbe>& probes) {
  if (changes.nodes.size() < 2) return Management(changes, "a single node has no peers");
  std::map<std::string, std::string> tunnel;
  for (const auto& n : changes.nodes) {
    if (!n.plan.wireguard) {
      return Management(changes, n.node + " has no WireGuard control plane in the fabric plan");
    }
    tunnel[n.node] = n.plan.wireguard->address.ip.ToString();
  }
  std::vector<std::string> problems;
  for (const auto& n : changes.nodes) {
    auto it = std::find_if(probes.begin(), probes.end(),
                           [&](const ControlPlaneProbe& p) { return p.node == n.node; });
    if (it == probes.end()) {
      problems.push_back(n.node + ": not probed");
      continue;
    }
    if (!it->status.ok()) {
      problems.push_back(n.node + ": " + it->status.message());
      continue;
    }
    if (!it->interface_up) {
      problems.push_back(n.node + ": " + n.plan.wireguard->interface + " is down or lacks " +
                         n.plan.wireguard->address.ToString());
      continue;
    }
    for (const auto& [other, address] : tunnel) {
      if (other == n.node) continue;
      auto peer = it->peers.find(address);
      if (peer == it->peers.end() || !peer->second) {
        problems.push_back(n.node + ": no answer from " + other + " at " + address);
      }
    }
  }
  if (!problems.empty()) {
    return Management(changes, "the WireGuard tunnel is down (" + Join(problems, "; ") + "); " +
                                   kFix);
  }
  ControlPlane c;
  c.wireguard = true;
  c.interface = changes.nodes[0].plan.wireguard->interface;
  c.addresses = std::move(tunnel);
  return c;
}

ControlPlane ProbeControlPlane(ssh::Transport& transport, const ClusterChanges& changes) {
  std::vector<std::string> nodes;
  for (const auto& n : changes.nodes) {
    if (!n.plan.wireguard) return DecideControlPlane(changes, {});
    nodes.push_back(n.node);
  }
  std::vector<ControlPlaneProbe> probes(changes.nodes.size());
  ssh::ParallelFor(changes.nodes.size(), changes.nodes.size(), [&](size_t i) {
    const NodeChanges& n = changes.nodes[i];
    std::vector<std::string> peers;
    for (const auto& other : changes.nodes) {
      if (other.node != n.node) peers.push_back(other.plan.wireguard->address.ip.ToString());
    }
    Result<ssh::CommandResult> r =
        transport.Run(n.node, ControlProbeCommand(*n.plan.wireguard, peers));
    if (!r.ok()) {
      probes[i] = {.node = n.node, .status = r.status()};
      return;
    }
    probes[i] = ParseControlProbe(n.node, r->stdout_data);
  });
  return DecideControlPlane(changes, probes);
}

}  // namespace spark::fabric
