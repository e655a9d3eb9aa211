#include "sparkctl/sim/cabling_plan.h"

#include <array>

#include "base/strings.h"

namespace spark::sim {
namespace {

constexpr std::array<std::string_view, 4> kTopologyNames = {"pair", "ring", "line", "switched"};

std::string CableBridge(int cable, int twin) {
  return "c" + std::to_string(cable) + "t" + std::to_string(twin);
}

std::string RailBridge(int port, int twin) {
  return "rail" + std::to_string(port) + "t" + std::to_string(twin);
}

// Bridge membership before carrier: cables (or rails), then swaps and the miscable.
Wiring BaseMembership(Topology topology, int nodes, const FabricFaults& faults) {
  Wiring wiring;
  for (int r = 0; r < nodes; ++r)
    for (int p = 0; p < kPorts; ++p)
      for (int t = 0; t < kTwins; ++t)
        wiring[WireEndName(r, p, t)].bridge =
            topology == Topology::kSwitched ? RailBridge(p, t) : "";
  std::vector<Cable> cables = PlanCables(topology, nodes);
  for (size_t c = 0; c < cables.size(); ++c) {
    for (int t = 0; t < kTwins; ++t) {
      wiring[WireEndName(cables[c].a.rank, cables[c].a.port, t)].bridge = CableBridge(c, t);
      wiring[WireEndName(cables[c].b.rank, cables[c].b.port, t)].bridge = CableBridge(c, t);
    }
  }
  auto swap_ends = [&](const std::string& x, const std::string& y) {
    std::swap(wiring[x].bridge, wiring[y].bridge);
  };
  if (faults.miscabled && nodes > 1)
    for (int t = 0; t < kTwins; ++t) swap_ends(WireEndName(1, 0, t), WireEndName(1, 1, t));
  for (const PortRef& s : faults.swapped)
    swap_ends(WireEndName(s.rank, s.port, 0), WireEndName(s.rank, s.port, 1));
  return wiring;
}

}  // namespace

Result<Topology> ParseTopology(std::string_view name) {
  for (size_t i = 0; i < kTopologyNames.size(); ++i)
    if (name == kTopologyNames[i]) return static_cast<Topology>(i);
  std::vector<std::string> names(kTopologyNames.begin(), kTopologyNames.end());
  return InvalidArgumentError("unknown topology '" + std::string(name) + "'" +
                              DidYouMean(name, names) + "; use pair, ring, line or switched");
}

std::string_view TopologyName(Topology topology) {
  return kTopologyNames[static_cast<size_t>(topology)];
}

Status ValidateNodeCount(Topology topology, int nodes) {
  int min = topology == Topology::kRing ? 3 : kMinNodes;
  int max = topology == Topology::kPair ? 2 : kMaxNodes;
  if (nodes >= min && nodes <= max) return Status::Ok();
  return InvalidArgumentError("a " + std::string(TopologyName(topology)) + " needs " +
                              (min == max ? std::to_string(min)
                                          : std::to_string(min) + " to " + std::to_string(max)) +
                              " nodes, not " + std::to_string(nodes) + "; change --nodes");
}

std::string_view FabricNetdev(int port, int twin) {
  static constexpr std::string_view kNames[kPorts][kTwins] = {
      {"enp1s0f0np0", "enP2p1s0f0np0"}, {"enp1s0f1np1", "enP2p1s0f1np1"}};
  return kNames[port][twin];
}

std::string_view RdmaDevice(int port, int twin) {
  static constexpr std::string_view kNames[kPorts][kTwins] = {{"rocep1s0f0", "roceP2p1s0f0"},
                                                              {"rocep1s0f1", "roceP2p1s0f1"}};
  return kNames[port][twin];
}

std::string NodeName(int rank) { return "spark-" + std::to_string(rank); }

std::vector<Cable> PlanCables(Topology topology, int nodes) {
  std::vector<Cable> cables;
  switch (topology) {
    case Topology::kPair:
      cables.push_back({{0, 0}, {1, 0}});
      break;
    case Topology::kRing:
    case Topology::kLine: {
      int count = topology == Topology::kRing ? nodes : nodes - 1;
      for (int r = 0; r < count; ++r) cables.push_back({{r, 0}, {(r + 1) % nodes, 1}});
      break;
    }
    case Topology::kSwitched:
      break;
  }
  return cables;
}

std::string WireEndName(int rank, int port, int twin) {
  return "n" + std::to_string(rank) + "p" + std::to_string(port) + "t" + std::to_string(twin);
}

std::vector<std::string> PlanBridges(Topology topology, int nodes) {
  std::vector<std::string> bridges;
  if (topology == Topology::kSwitched) {
    for (int p = 0; p < kPorts; ++p)
      for (int t = 0; t < kTwins; ++t) bridges.push_back(RailBridge(p, t));
    return bridges;
  }
  size_t cables = PlanCables(topology, nodes).size();
  for (size_t c = 0; c < cables; ++c)
    for (int t = 0; t < kTwins; ++t) bridges.push_back(CableBridge(c, t));
  return bridges;
}

Wiring ComputeWiring(Topology topology, int nodes, const FabricFaults& faults) {
  Wiring wiring = BaseMembership(topology, nodes, faults);
  // A cable is a bridge with exactly two members: pulling it takes carrier from both ends. On a
  // switch rail only the node's own link goes down.
  std::map<std::string, std::vector<std::string>> members;
  for (const auto& [end, state] : wiring)
    if (!state.bridge.empty()) members[state.bridge].push_back(end);
  std::set<std::string> down;
  for (const PortRef& u : faults.unplugged) {
    for (int t = 0; t < kTwins; ++t) {
      const std::string end = WireEndName(u.rank, u.port, t);
      down.insert(end);
      const std::string& bridge = wiring[end].bridge;
      if (topology != Topology::kSwitched && !bridge.empty())
        for (const std::string& other : members[bridge]) down.insert(other);
    }
  }
  for (auto& [end, state] : wiring) state.up = !state.bridge.empty() && !down.contains(end);
  return wiring;
}

std::vector<std::string> WiringDiff(const Wiring& from, const Wiring& to) {
  std::vector<std::string> lines;
  for (const auto& [end, want] : to) {
    auto it = from.find(end);
    WireEndState have = it == from.end() ? WireEndState{} : it->second;
    if (have.bridge != want.bridge)
      lines.push_back("link set dev " + end +
                      (want.bridge.empty() ? " nomaster" : " master " + want.bridge));
    if (have.up != want.up) lines.push_back("link set dev " + end + (want.up ? " up" : " down"));
  }
  return lines;
}

}  // namespace spark::sim
