// Properties every fabric plan must have, checked independently of how the planner computes them:
// a small forwarding simulator walks packets hop by hop over the cables recorded in the
// ClusterSpec (not over the planner's topology) and follows each node's routes.
#include <map>
#include <optional>
#include <queue>
#include <set>

#include <gtest/gtest.h>

#include "base/strings.h"
#include "netplan/node_plan.h"
#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using namespace ::spark::netplan::testing;  // NOLINT

struct Case {
  std::string name;
  ClusterSpec spec;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> AllCases() {
  std::vector<Case> cases = {{"pair", MakePair()}, {"pair2", MakePair(true)}};
  for (int n = 3; n <= 8; ++n) cases.push_back({"ring" + std::to_string(n), MakeRing(n)});
  for (int n = 2; n <= 8; ++n) cases.push_back({"line" + std::to_string(n), MakeLine(n)});
  for (int n = 2; n <= 8; ++n) cases.push_back({"switched" + std::to_string(n), MakeSwitched(n)});
  return cases;
}

// (port, twin) of a fabric netdev name, from the hardware table.
std::pair<int, int> PortTwinOf(const std::string& netdev) {
  for (int p = 0; p < 2; ++p) {
    for (int t = 0; t < 2; ++t) {
      if (netdev == kPortTwins[p][t].netdev) return {p, t};
    }
  }
  ADD_FAILURE() << "not a fabric netdev: " << netdev;
  return {0, 0};
}

class Fabric {
 public:
  Fabric(const ClusterSpec& spec, const FabricPlan& plan) : spec_(spec), plan_(plan) {
    for (const NodePlan& node : plan.nodes) {
      for (const FabricInterface& fi : node.addressing.interfaces) {
        owner_[fi.address.ip.value] = node.addressing.rank;
      }
    }
  }

  // The ranks reachable at layer 2 from (rank, netdev): the cabled peer, or every node on the
  // rail of a switched fabric. `down` holds cables (rank, port of either end) that are pulled.
  std::set<int> L2Neighbours(int rank, const std::string& netdev,
                             const std::set<std::pair<int, int>>& down) const {
    auto [port, twin] = PortTwinOf(netdev);
    std::set<int> out;
    if (*spec_.fabric.kind == TopologyKind::kSwitched) {
      for (int r = 0; r < static_cast<int>(plan_.nodes.size()); ++r) {
        if (r != rank) out.insert(r);
      }
      return out;
    }
    const NodeSpec* node = NodeByRank(rank);
    for (const PortSpec& p : node->ports) {
      if (p.name != kPortNames[port] || !p.peer) continue;
      const NodeSpec* peer = spec_.FindNode(p.peer->node);
      int peer_port = p.peer->port == "p1" ? 1 : 0;
      if (down.count({rank, port}) || down.count({*peer->rank, peer_port})) continue;
      out.insert(*peer->rank);
    }
    (void)twin;
    return out;
  }

  // Walks a packet from `from` to the node owning `dst`. hops: nullopt when dropped (no route,
  // or a next hop that is not physically attached); looped: still travelling after 2n hops.
  struct Trip {
    std::optional<int> hops;
    bool looped = false;
    std::set<std::pair<int, int>> ports_used;  // (rank, port) the packet left through
  };
  Trip Walk(int from, Ipv4 dst, const std::set<std::pair<int, int>>& down) const {
    Trip trip;
    int cur = from;
    for (int hops = 0; hops <= 2 * static_cast<int>(plan_.nodes.size()); ++hops) {
      if (owner_.at(dst.value) == cur) {
        trip.hops = hops;
        return trip;
      }
      std::optional<std::pair<std::string, Ipv4>> next = NextHop(cur, dst, down);
      if (!next) return trip;
      auto owner = owner_.find(next->second.value);
      if (owner == owner_.end()) return trip;
      if (!L2Neighbours(cur, next->first, down).count(owner->second)) return trip;
      trip.ports_used.insert({cur, PortTwinOf(next->first).first});
      cur = owner->second;
    }
    trip.looped = true;
    return trip;
  }

 private:
  const NodeSpec* NodeByRank(int rank) const {
    for (const NodeSpec& node : spec_.nodes) {
      if (node.rank == rank) return &node;
    }
    return nullptr;
  }

  bool Up(int rank, const std::string& netdev, const std::set<std::pair<int, int>>& down) const {
    return !down.count({rank, PortTwinOf(netdev).first});
  }

  // Connected subnet first, then the lowest-metric route whose netdev has carrier (as with
  // ignore_routes_with_linkdown=1).
  std::optional<std::pair<std::string, Ipv4>> NextHop(
      int rank, Ipv4 dst, const std::set<std::pair<int, int>>& down) const {
    const NodeAddressing& node = plan_.nodes[rank].addressing;
    for (const FabricInterface& fi : node.interfaces) {
      if (fi.address.Subnet().Contains(dst) && Up(rank, fi.netdev, down)) {
        return std::make_pair(fi.netdev, dst);
      }
    }
    const Route* best = nullptr;
    for (const Route& r : node.routes) {
      if (!r.to.Contains(dst) || !Up(rank, r.dev, down)) continue;
      if (!best || r.metric < best->metric) best = &r;
    }
    if (!best) return std::nullopt;
    return std::make_pair(best->dev, best->via);
  }

  const ClusterSpec& spec_;
  const FabricPlan& plan_;
  std::map<uint32_t, int> owner_;
};

// Hop distances over the cables of the spec (breadth-first), ignoring `down` cables.
std::vector<int> CableDistances(const ClusterSpec& spec, int from,
                                const std::set<std::pair<int, int>>& down) {
  std::vector<int> dist(spec.nodes.size(), -1);
  std::queue<int> queue;
  dist[from] = 0;
  queue.push(from);
  while (!queue.empty()) {
    int r = queue.front();
    queue.pop();
    for (const NodeSpec& node : spec.nodes) {
      if (node.rank != r) continue;
      for (const PortSpec& p : node.ports) {
        if (!p.peer || down.count({r, p.name == "p1" ? 1 : 0})) continue;
        const NodeSpec* peer = spec.FindNode(p.peer->node);
        if (down.count({*peer->rank, p.peer->port == "p1" ? 1 : 0})) continue;
        if (dist[*peer->rank] < 0) {
          dist[*peer->rank] = dist[r] + 1;
          queue.push(*peer->rank);
        }
      }
    }
  }
  if (*spec.fabric.kind == TopologyKind::kSwitched) {
    for (int& d : dist) d = d == 0 ? 0 : 1;
  }
  return dist;
}

class PlanPropertiesTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto plan = BuildFabricPlan(GetParam().spec, MakeInputs(GetParam().spec));
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
  }
  std::vector<const FabricInterface*> AllInterfaces() const {
    std::vector<const FabricInterface*> out;
    for (const NodePlan& node : plan_.nodes) {
      for (const FabricInterface& fi : node.addressing.interfaces) out.push_back(&fi);
    }
    return out;
  }
  FabricPlan plan_;
};

TEST_P(PlanPropertiesTest, EveryNodeReachesEveryAddressOnAShortestPath) {
  const ClusterSpec& spec = GetParam().spec;
  int n = static_cast<int>(plan_.nodes.size());
  bool odd_ring = *spec.fabric.kind == TopologyKind::kRing && n % 2 == 1;
  Fabric fabric(spec, plan_);
  for (int from = 0; from < n; ++from) {
    std::vector<int> dist = CableDistances(spec, from, {});
    for (const NodePlan& to : plan_.nodes) {
      for (const FabricInterface& fi : to.addressing.interfaces) {
        std::optional<int> hops = fabric.Walk(from, fi.address.ip, {}).hops;
        ASSERT_TRUE(hops) << "rank " << from << " cannot reach " << fi.address.ToString();
        int best = dist[to.addressing.rank];
        // Odd rings: a cable opposite a node is equally far both ways; the /24 route reaches
        // its nearer end first, the far end then costs one hop more than the shortest path.
        EXPECT_LE(*hops, best + (odd_ring ? 1 : 0))
            << "rank " << from << " -> " << fi.address.ToString();
        EXPECT_GE(*hops, best);
      }
    }
  }
}

TEST_P(PlanPropertiesTest, RoutesTakeTheShorterSide) {
  const ClusterSpec& spec = GetParam().spec;
  Fabric fabric(spec, plan_);
  for (const NodePlan& node : plan_.nodes) {
    int from = node.addressing.rank;
    std::vector<int> dist = CableDistances(spec, from, {});
    for (const Route& route : node.addressing.routes) {
      if (route.metric != kPrimaryRouteMetric) continue;
      // The subnet's nearer end must be reached in as few hops as the cable graph allows.
      int got = 1 << 20, want = 1 << 20;
      for (const FabricInterface* fi : AllInterfaces()) {
        if (!(fi->address.Subnet() == route.to)) continue;
        got = std::min(got, fabric.Walk(from, fi->address.ip, {}).hops.value_or(1 << 20));
        for (const NodePlan& owner : plan_.nodes) {
          for (const FabricInterface& o : owner.addressing.interfaces) {
            if (&o == fi) want = std::min(want, dist[owner.addressing.rank]);
          }
        }
      }
      EXPECT_EQ(got, want) << node.addressing.name << " route to " << route.to.ToString();
    }
  }
}

// Pulling one cable of a ring must never make packets loop (backup routes exist only where
// loop-free); every trip that did not cross the pulled cable is unchanged; small rings (3, 4)
// keep every address reachable through their backup routes. Only rings have a backup side (a
// skip here would mark the whole ctest entry skipped).
TEST_P(PlanPropertiesTest, RingWithOnePulledCableNeverLoops) {
  const ClusterSpec& spec = GetParam().spec;
  if (*spec.fabric.kind != TopologyKind::kRing) return;
  Fabric fabric(spec, plan_);
  int n = static_cast<int>(plan_.nodes.size());
  for (int cut = 0; cut < n; ++cut) {
    // Both ends of the pulled cable lose carrier.
    std::set<std::pair<int, int>> down = {{cut, 0}, {(cut + 1) % n, 1}};
    for (int from = 0; from < n; ++from) {
      for (const NodePlan& to : plan_.nodes) {
        for (const FabricInterface& fi : to.addressing.interfaces) {
          if (fi.port == 0 && to.addressing.rank == cut) continue;  // on the pulled cable
          if (fi.port == 1 && to.addressing.rank == (cut + 1) % n) continue;
          auto before = fabric.Walk(from, fi.address.ip, {});
          auto after = fabric.Walk(from, fi.address.ip, down);
          std::string trip = "cable " + std::to_string(cut) + " pulled: rank " +
                             std::to_string(from) + " -> " + fi.address.ToString();
          EXPECT_FALSE(after.looped) << trip;
          bool crossed = before.ports_used.count({cut, 0}) ||
                         before.ports_used.count({(cut + 1) % n, 1});
          if (!crossed) {
            EXPECT_EQ(after.hops, before.hops) << trip;
          }
          if (n <= 4) {
            EXPECT_TRUE(after.hops) << trip;
          }
        }
      }
    }
  }
}

// Every ring node keeps a backup for at least the cable opposite it (both twins), and never more
// than one per remote subnet.
TEST_P(PlanPropertiesTest, RingNodesKeepBackupsForTheOppositeCable) {
  const ClusterSpec& spec = GetParam().spec;
  if (*spec.fabric.kind != TopologyKind::kRing) return;
  int n = static_cast<int>(plan_.nodes.size());
  for (const NodePlan& node : plan_.nodes) {
    int backups = 0;
    for (const Route& r : node.addressing.routes) backups += r.metric == kBackupRouteMetric;
    EXPECT_GE(backups, 2) << node.addressing.name;
    EXPECT_LE(backups, 2 * (n - 2)) << node.addressing.name;
  }
}

TEST_P(PlanPropertiesTest, SubnetsAreDistinctInsideTheBlockAndPointToPoint) {
  const AddressPlan& a = plan_.addresses;
  for (size_t i = 0; i < a.subnets.size(); ++i) {
    EXPECT_TRUE(a.fabric.Contains(a.subnets[i].network)) << a.subnets[i].ToString();
    for (size_t j = i + 1; j < a.subnets.size(); ++j) {
      EXPECT_FALSE(a.subnets[i].Overlaps(a.subnets[j])) << i << " and " << j;
    }
  }
  std::map<std::string, std::vector<const FabricInterface*>> by_subnet;
  for (const FabricInterface* fi : AllInterfaces()) {
    by_subnet[fi->address.Subnet().ToString()].push_back(fi);
  }
  bool switched = *GetParam().spec.fabric.kind == TopologyKind::kSwitched;
  EXPECT_EQ(by_subnet.size(), a.subnets.size()) << "every subnet used";
  for (const auto& [subnet, members] : by_subnet) {
    EXPECT_EQ(members.size(), switched ? plan_.nodes.size() : 2u) << subnet;
    std::set<uint32_t> hosts;
    for (const FabricInterface* fi : members) {
      EXPECT_TRUE(hosts.insert(fi->address.ip.value).second) << "duplicate host on " << subnet;
      EXPECT_EQ(fi->twin, members[0]->twin) << subnet << " mixes twins";
    }
  }
}

TEST_P(PlanPropertiesTest, BothTwinsOfEveryUsedPortAreInNcclIbHca) {
  for (const NodePlan& node : plan_.nodes) {
    std::string hca = node.Env("NCCL_IB_HCA");
    ASSERT_TRUE(StartsWith(hca, "=")) << "exact-match prefix";
    std::vector<std::string> devices = Split(hca.substr(1), ',');
    std::set<int> ports;
    for (const FabricInterface& fi : node.addressing.interfaces) ports.insert(fi.port);
    EXPECT_EQ(devices.size(), 2 * ports.size()) << hca;
    for (int port : ports) {
      for (int twin = 0; twin < 2; ++twin) {
        EXPECT_NE(std::find(devices.begin(), devices.end(), kPortTwins[port][twin].rdma_device),
                  devices.end())
            << node.addressing.name << " lacks " << kPortTwins[port][twin].rdma_device;
      }
      // Both twins on one subnet is one of the fatal traps.
      EXPECT_FALSE(node.addressing.FindInterface(port, 0)->address.Subnet() ==
                   node.addressing.FindInterface(port, 1)->address.Subnet());
    }
  }
}

TEST_P(PlanPropertiesTest, NcclEnvironmentFollowsTheFieldNotes) {
  bool switchless = *GetParam().spec.fabric.kind == TopologyKind::kRing ||
                    *GetParam().spec.fabric.kind == TopologyKind::kLine;
  for (const NodePlan& node : plan_.nodes) {
    EXPECT_EQ(node.Env("NCCL_NET"), "IB");
    EXPECT_EQ(node.Env("NCCL_IB_DISABLE"), "0");
    EXPECT_EQ(node.Env("NCCL_IB_GID_INDEX"), "3");
    EXPECT_EQ(node.Env("NCCL_SOCKET_IFNAME"), "=enP7s7");
    EXPECT_EQ(node.Env("NCCL_ALGO"), switchless ? "Ring" : "");
    EXPECT_EQ(node.Env("NCCL_IB_SUBNET_AWARE_ROUTING"), switchless ? "1" : "");
    EXPECT_EQ(node.Env("NCCL_IB_MERGE_NICS"), switchless ? "0" : "");
    EXPECT_EQ(node.Env("NCCL_CROSS_NIC"), switchless ? "1" : "");
    const TopologyKind kind = *GetParam().spec.fabric.kind;
    EXPECT_EQ(node.Env("SPARK_NCCL_TOPOLOGY"),
              kind == TopologyKind::kRing   ? "ring"
              : kind == TopologyKind::kLine ? "line"
              : kind == TopologyKind::kPair ? "pair"
                                            : "switched");
  }
}

TEST_P(PlanPropertiesTest, WireGuardAddressesUniqueAndEndpointsAttached) {
  std::set<std::string> addresses;
  for (const NodePlan& node : plan_.nodes) {
    ASSERT_TRUE(node.wireguard);
    EXPECT_TRUE(addresses.insert(node.wireguard->address.ToString()).second);
    EXPECT_EQ(node.wireguard->peers.size(), plan_.nodes.size() - 1);
    for (const WireGuardPeer& peer : node.wireguard->peers) {
      std::string host = peer.endpoint.substr(0, peer.endpoint.find(':'));
      if (!peer.endpoint_on_fabric) {
        EXPECT_EQ(host, GetParam().spec.FindNode(peer.name)->address);
        continue;
      }
      auto ip = Ipv4::Parse(host);
      ASSERT_TRUE(ip);
      bool attached = false;
      for (const FabricInterface& fi : node.addressing.interfaces) {
        attached |= fi.address.Subnet().Contains(*ip);
      }
      EXPECT_TRUE(attached) << node.addressing.name << " -> " << peer.endpoint;
      const NodePlan* peer_plan = plan_.FindNode(peer.name);
      bool owned = false;
      for (const FabricInterface& fi : peer_plan->addressing.interfaces) owned |= fi.address.ip == *ip;
      EXPECT_TRUE(owned) << peer.endpoint << " is not " << peer.name << "'s";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, PlanPropertiesTest, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace spark::netplan
