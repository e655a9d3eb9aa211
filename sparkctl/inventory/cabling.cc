#include "sparkctl/inventory/cabling.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace spark::inventory {
namespace {

using netplan::TopologyKind;

struct NetdevRef {
  int port = -1;  // 0 or 1
  int twin = -1;  // 0 or 1
};

NetdevRef Locate(const std::string& netdev) {
  for (int p = 0; p < 2; ++p) {
    for (int t = 0; t < 2; ++t) {
      if (netdev == netplan::kPortTwins[p][t].netdev) return {p, t};
    }
  }
  return {};
}

std::string PortName(int p) { return netplan::kPortNames[p]; }

// What one node's port saw: peer node index -> (peer port, twins).
struct PortView {
  std::map<int, std::set<std::pair<int, int>>> peers;  // peer node -> {(peer port, local twin)}
  std::set<int> twins_with_peer;
  bool crossed = false;
};

struct Graph {
  int n = 0;
  std::vector<std::array<PortView, 2>> ports;
};

int FindNode(const std::vector<host::BeaconReport>& reports, const std::string& machine_id,
             const std::string& hostname) {
  for (size_t i = 0; i < reports.size(); ++i) {
    if (reports[i].self.machine_id == machine_id && reports[i].self.hostname == hostname) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

Graph BuildGraph(const std::vector<std::string>& names, const std::vector<host::BeaconReport>& reports,
                 std::vector<CablingProblem>* problems) {
  Graph g;
  g.n = static_cast<int>(reports.size());
  g.ports.resize(reports.size());
  for (int i = 0; i < g.n; ++i) {
    for (const auto& s : reports[i].sightings) {
      NetdevRef local = Locate(s.local_netdev), remote = Locate(s.peer_netdev);
      int peer = FindNode(reports, s.peer_machine_id, s.peer_hostname);
      if (local.port < 0 || remote.port < 0) continue;
      if (peer < 0) {
        problems->push_back({names[i], PortName(local.port),
                             names[i] + " " + PortName(local.port) + " is cabled to '" +
                                 s.peer_hostname + "', which is not in this inventory: add it or "
                                 "move the cable to the right node"});
        continue;
      }
      PortView& view = g.ports[i][local.port];
      view.peers[peer].insert({remote.port, local.twin});
      view.twins_with_peer.insert(local.twin);
      if (local.twin != remote.twin) view.crossed = true;
    }
  }
  return g;
}

void CheckIdentities(const std::vector<std::string>& names,
                     const std::vector<host::BeaconReport>& reports,
                     std::vector<CablingProblem>* problems) {
  std::map<std::string, size_t> ids;
  for (size_t i = 0; i < reports.size(); ++i) {
    auto [it, fresh] = ids.emplace(reports[i].self.machine_id, i);
    if (!fresh) {
      problems->push_back({names[i], "", names[i] + " has the same machine-id as " + names[it->second] +
                                             " (flashed from one image): on one of them run "
                                             "rm /etc/machine-id && systemd-machine-id-setup"});
    }
  }
}

// A cable between two nodes: each end's port must list only that peer.
std::vector<Cable> Cables(const std::vector<std::string>& names, const Graph& g,
                          std::vector<CablingProblem>* problems) {
  std::vector<Cable> cables;
  for (int i = 0; i < g.n; ++i) {
    for (int p = 0; p < 2; ++p) {
      const PortView& v = g.ports[i][p];
      for (const auto& [peer, ends] : v.peers) {
        int peer_port = ends.begin()->first;
        if (peer < i || (peer == i && peer_port < p)) continue;  // each cable once
        Cable c{names[i], PortName(p), names[peer], PortName(peer_port), v.crossed,
                static_cast<int>(v.twins_with_peer.size())};
        if (c.twins_crossed) {
          problems->push_back({names[i], PortName(p),
                               "cable " + names[i] + " " + PortName(p) + " - " + names[peer] + " " +
                                   PortName(peer_port) + ": its two twins are crossed (twin a lands "
                                   "on twin b), so NCCL pairs the wrong RDMA devices; re-seat or "
                                   "replace the cable"});
        }
        cables.push_back(c);
      }
      if (!v.peers.empty() && v.peers.size() == 1 && v.twins_with_peer.size() == 1) {
        int missing = *v.twins_with_peer.begin() == 0 ? 1 : 0;
        problems->push_back({names[i], PortName(p),
                             names[i] + " " + PortName(p) + ": twin " +
                                 netplan::kPortTwins[p][missing].netdev +
                                 " hears nothing; the cable carries half its bandwidth. Check that "
                                 "both twins are up and the cable is fully seated"});
      }
    }
  }
  return cables;
}

// Cables per node as (local port, peer node, peer port).
struct Edge {
  int port, peer, peer_port;
};

std::vector<std::vector<Edge>> Adjacency(const Graph& g) {
  std::vector<std::vector<Edge>> adj(g.n);
  for (int i = 0; i < g.n; ++i) {
    for (int p = 0; p < 2; ++p) {
      for (const auto& [peer, ends] : g.ports[i][p].peers) adj[i].push_back({p, peer, ends.begin()->first});
    }
  }
  return adj;
}

// Walks a path or cycle from `start`, first along `first_edge`.
std::vector<int> Walk(const std::vector<std::vector<Edge>>& adj, int start, int first_edge) {
  std::vector<int> order = {start};
  int prev = -1, cur = start;
  const Edge* e = &adj[start][first_edge];
  while (true) {
    int next = e->peer;
    if (next == start || std::find(order.begin(), order.end(), next) != order.end()) break;
    order.push_back(next);
    prev = cur;
    cur = next;
    const Edge* step = nullptr;
    for (const Edge& cand : adj[cur]) {
      if (cand.peer != prev) step = &cand;
    }
    if (!step) break;
    e = step;
  }
  return order;
}

int PortTowards(const std::vector<Edge>& edges, int peer) {
  for (const Edge& e : edges) {
    if (e.peer == peer) return e.port;
  }
  return -1;
}

// Nodes whose in/out cables violate "port 0 of rank r to port 1 of rank r+1".
std::vector<int> RingViolations(const std::vector<std::vector<Edge>>& adj, const std::vector<int>& order,
                                bool closed) {
  std::vector<int> bad;
  int n = static_cast<int>(order.size());
  for (int r = 0; r < n; ++r) {
    bool has_next = closed || r + 1 < n, has_prev = closed || r > 0;
    int out = has_next ? PortTowards(adj[order[r]], order[(r + 1) % n]) : 0;
    int in = has_prev ? PortTowards(adj[order[r]], order[(r + n - 1) % n]) : 1;
    if (out != 0 || in != 1) bad.push_back(r);
  }
  return bad;
}

void OrderChain(const std::vector<std::string>& names, const std::vector<std::vector<Edge>>& adj,
                bool closed, CablingResult* result) {
  int n = static_cast<int>(adj.size());
  // A ring is walked from rank 0 in both directions; a line from each of its two ends. The walk
  // with the fewest nodes cabled against "p0 to the next rank's p1" wins.
  std::vector<std::pair<int, int>> starts;  // (node, first edge)
  for (int i = 0; i < n; ++i) {
    if (closed && i != 0) continue;
    if (!closed && adj[i].size() != 1) continue;
    for (size_t e = 0; e < adj[i].size(); ++e) starts.push_back({i, static_cast<int>(e)});
  }
  std::vector<int> best;
  std::vector<int> best_bad;
  for (auto [start, first] : starts) {
    std::vector<int> order = Walk(adj, start, first);
    std::vector<int> bad = RingViolations(adj, order, closed);
    if (best.empty() || bad.size() < best_bad.size()) {
      best = order;
      best_bad = bad;
    }
  }
  if (static_cast<int>(best.size()) != n) {
    result->problems.push_back({"", "", "the fabric cables do not connect every node in one chain"});
    return;
  }
  // Rank 0 is the inventory's first node on a ring; the chain keeps its direction.
  if (closed) std::rotate(best.begin(), std::find(best.begin(), best.end(), 0), best.end());
  best_bad = RingViolations(adj, best, closed);
  for (int i : best) result->order.push_back(names[i]);
  for (int r : best_bad) {
    const std::string& name = names[best[r]];
    result->problems.push_back(
        {name, "", name + " (rank " + std::to_string(r) + ") should have its cable to " +
                       names[best[(r + 1) % n]] + " in p0 and its cable from " +
                       names[best[(r + n - 1) % n]] + " in p1 (port 0 of each rank goes to port 1 "
                       "of the next); swap the two cables at " + name + ". Left as is, NCCL fails "
                       "later with ibv_modify_qp error 110"});
  }
}

}  // namespace

CablingResult InferCabling(const std::vector<std::string>& names,
                           const std::vector<host::BeaconReport>& reports) {
  CablingResult result;
  CheckIdentities(names, reports, &result.problems);
  Graph g = BuildGraph(names, reports, &result.problems);
  result.cables = Cables(names, g, &result.problems);
  int n = g.n;
  bool switched = false;
  for (const auto& node : g.ports) {
    for (const auto& port : node) switched = switched || port.peers.size() > 1;
  }
  if (n == 1) {
    result.kind = TopologyKind::kSingle;
    result.order = names;
    return result;
  }
  if (switched) {
    result.kind = TopologyKind::kSwitched;
    result.order = names;
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < 2; ++p) {
        if (g.ports[i][p].peers.size() + 1 < static_cast<size_t>(n)) {
          result.problems.push_back({names[i], PortName(p),
                                     names[i] + " " + PortName(p) + " reaches only " +
                                         std::to_string(g.ports[i][p].peers.size()) + " of the " +
                                         std::to_string(n - 1) + " other nodes through the switch"});
        }
      }
    }
    result.cables.clear();  // a switched port has no single peer
    return result;
  }
  auto adj = Adjacency(g);
  // Two cables between the same two nodes count once for the graph's shape.
  for (int i = 0; i < n; ++i) {
    if (adj[i].empty()) {
      result.problems.push_back({names[i], "", names[i] + " hears no other node on any fabric port: "
                                                          "check that its cables are plugged in"});
    }
  }
  if (!result.problems.empty() && std::any_of(adj.begin(), adj.end(), [](auto& a) { return a.empty(); })) {
    return result;
  }
  if (n == 2) {
    result.kind = TopologyKind::kPair;
    result.order = names;
    return result;
  }
  int ends = 0;
  for (const auto& a : adj) ends += a.size() == 1;
  bool closed = ends == 0;
  if (ends != 0 && ends != 2) {
    result.problems.push_back({"", "", "the cables form neither a ring nor a line"});
    return result;
  }
  OrderChain(names, adj, closed, &result);
  if (result.order.size() == static_cast<size_t>(n)) {
    result.kind = closed ? TopologyKind::kRing : TopologyKind::kLine;
  }
  if (!closed && result.kind) {
    result.problems.push_back(
        {result.order.back(), "p0",
         "the cables form a line, not a ring: if this should be a ring, the cable from " +
             result.order.back() + " p0 to " + result.order.front() + " p1 is missing or unplugged"});
  }
  return result;
}

void ApplyCabling(const CablingResult& result, netplan::ClusterSpec* spec) {
  if (result.kind) spec->fabric.kind = result.kind;
  for (size_t r = 0; r < result.order.size(); ++r) {
    for (auto& node : spec->nodes) {
      if (node.name == result.order[r]) node.rank = static_cast<int>(r);
    }
  }
  for (auto& node : spec->nodes) {
    node.ports = {{"p0", std::nullopt}, {"p1", std::nullopt}};
    for (const Cable& c : result.cables) {
      if (c.a_node == node.name) node.ports[c.a_port == "p1"].peer = netplan::PortPeer{c.b_node, c.b_port};
      if (c.b_node == node.name) node.ports[c.b_port == "p1"].peer = netplan::PortPeer{c.a_node, c.a_port};
    }
  }
}

std::string DescribeTopology(const CablingResult& result) {
  if (!result.kind) return "unknown";
  std::string out = std::string(netplan::TopologyName(*result.kind)) + ":";
  std::string sep = *result.kind == TopologyKind::kRing || *result.kind == TopologyKind::kLine ? " -> " : ", ";
  for (size_t i = 0; i < result.order.size(); ++i) out += (i ? sep : " ") + result.order[i];
  if (*result.kind == TopologyKind::kRing && !result.order.empty()) out += sep + result.order[0];
  return out;
}

}  // namespace spark::inventory
