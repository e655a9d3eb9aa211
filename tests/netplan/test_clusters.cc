#include "tests/netplan/test_clusters.h"

#include <utility>

namespace spark::netplan::testing {
namespace {

// {private, public} pairs made once with `wg genkey | tee k | wg pubkey`; test data only.
constexpr std::pair<const char*, const char*> kKeys[8] = {
    {"YPZ+NbmNxN1Gbu6pDJK5ZXforVnQbDNcLbWB4wcQsVk=", "Y7l/SOCAWDCRn/sHZZulb9N7hhRQj+nAWAvWNUv4oBo="},
    {"qMOWxYKAVhZ2fU4mKpC5DJMs8WxFXLgoiRoZjn8QV2w=", "pQOpsmmDV9mfolQ3rov0wybDX4fprj0cSTV6BAMUXkI="},
    {"AO+ikdJmL60KD9LNUhBK933SJpr645gemuYMo0Kq/lk=", "gWjl/GC4wT9WFOzO2e73jZo45rKHj3L2S5JE5cxcMWU="},
    {"kIRx4Beox9L8/5zNZ5ZvcH/loT36XZh6b/KnhxccSXo=", "5j6Zdje2vV3Ii88x9wyaLS7+hu4jZopIzodaLtcTwSU="},
    {"YNedaPk2yQ6qhfAVjOmusyB/rhUtl+HfRFD8pe7zxnU=", "46JEDgDZxdTE46asOIffQ61Ju9kDN+AT3kjzKaWT1xE="},
    {"mDBtLS2bH8zi7DGwedFlHD1uVGO18naswogOfwIa2nM=", "YoDea27yoOs0Cms0kbpTTh860xNUY0qD+nWJ3BHwJW4="},
    {"gB+vz0x3MxO+YDEZY1+v965KwH6wF/bymjCmPnJ3q2E=", "kMKC07vlEAvItQrNS+5G30e15F/SAmOEvXdg6Aa3/1U="},
    {"mGpSJqCP/WMdM0VhNZY1/v2upE93Otf7bZ4zJaIAxHg=", "TuSjDfsOV1hWEI6/w6Tl1SOUytvlfqhkmr73piIoezA="},
};

ClusterSpec MakeNodes(int n, TopologyKind kind) {
  ClusterSpec spec;
  spec.name = "lab";
  spec.fabric.kind = kind;
  // The default control-plane /29 holds six hosts; seven and eight nodes need a /28.
  if (n > 6) spec.control_plane.cidr = "10.253.255.0/28";
  for (int rank = n - 1; rank >= 0; --rank) {
    NodeSpec node;
    node.name = NodeName(rank);
    node.address = "198.19.0." + std::to_string(10 + rank);
    node.rank = rank;
    node.ports = {PortSpec{"p0", std::nullopt}, PortSpec{"p1", std::nullopt}};
    spec.nodes.push_back(node);
  }
  return spec;
}

PortSpec& PortOf(ClusterSpec* spec, int rank, int port) {
  for (NodeSpec& node : spec->nodes) {
    if (node.rank == rank) return node.ports[port];
  }
  return spec->nodes.front().ports[port];  // not reached in tests
}

}  // namespace

std::string NodeName(int rank) { return "spark-" + std::to_string(rank); }

void Unplug(ClusterSpec* spec, int rank, int port) {
  PortSpec& p = PortOf(spec, rank, port);
  if (p.peer) {
    const NodeSpec* peer = spec->FindNode(p.peer->node);
    PortOf(spec, *peer->rank, p.peer->port == "p1" ? 1 : 0).peer.reset();
  }
  p.peer.reset();
}

void Plug(ClusterSpec* spec, int rank_a, int port_a, int rank_b, int port_b) {
  Unplug(spec, rank_a, port_a);
  Unplug(spec, rank_b, port_b);
  PortOf(spec, rank_a, port_a).peer = PortPeer{NodeName(rank_b), kPortNames[port_b]};
  PortOf(spec, rank_b, port_b).peer = PortPeer{NodeName(rank_a), kPortNames[port_a]};
}

ClusterSpec MakeRing(int n) {
  ClusterSpec spec = MakeNodes(n, TopologyKind::kRing);
  for (int r = 0; r < n; ++r) Plug(&spec, r, 0, (r + 1) % n, 1);
  return spec;
}

ClusterSpec MakeLine(int n) {
  ClusterSpec spec = MakeNodes(n, TopologyKind::kLine);
  for (int r = 0; r + 1 < n; ++r) Plug(&spec, r, 0, r + 1, 1);
  return spec;
}

ClusterSpec MakePair(bool two_cables) {
  ClusterSpec spec = MakeNodes(2, TopologyKind::kPair);
  Plug(&spec, 0, 0, 1, 0);
  if (two_cables) Plug(&spec, 0, 1, 1, 1);
  return spec;
}

ClusterSpec MakeSwitched(int n) { return MakeNodes(n, TopologyKind::kSwitched); }

PlanInputs MakeInputs(const ClusterSpec& spec) {
  PlanInputs inputs;
  for (const NodeSpec& node : spec.nodes) {
    NodeInputs in;
    in.gid_index = 3;
    in.management_interface = "enP7s7";
    in.wg_private_key = kKeys[*node.rank].first;
    in.wg_public_key = kKeys[*node.rank].second;
    inputs.nodes[node.name] = in;
  }
  return inputs;
}

}  // namespace spark::netplan::testing
