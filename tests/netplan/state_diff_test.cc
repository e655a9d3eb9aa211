#include "netplan/state_diff.h"

#include <gtest/gtest.h>

#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using namespace ::spark::netplan::testing;  // NOLINT

NodePlan RingNode(int rank) {
  ClusterSpec spec = MakeRing(4);
  auto plan = BuildFabricPlan(spec, MakeInputs(spec));
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan->nodes[rank];
}

std::vector<std::string> Lines(const std::vector<Change>& changes) {
  std::vector<std::string> out;
  for (const Change& c : changes) {
    out.push_back(std::string(ChangeKindName(c.kind)) + ": " + c.description + " | " +
                  (c.command ? c.command->ToString() : "-"));
  }
  return out;
}

TEST(StateDiffTest, AppliedStateHasNoChanges) {
  NodeState desired = DesiredState(RingNode(0));
  EXPECT_TRUE(DiffState(desired, desired).empty());
}

TEST(StateDiffTest, FreshNodeNeedsEverything) {
  NodePlan node = RingNode(0);
  NodeState current;
  for (const FabricInterface& fi : node.addressing.interfaces) {
    current.links.push_back(LinkState{fi.netdev, 1500, false, {}});
  }
  std::vector<Change> changes = DiffState(current, DesiredState(node));
  // sysctls + per netdev (mtu, up, address) + routes.
  EXPECT_EQ(changes.size(), node.sysctls.size() + 4 * 3 + node.addressing.routes.size());
  EXPECT_EQ(changes.front().kind, ChangeKind::kSetSysctl);
  EXPECT_EQ(changes.back().kind, ChangeKind::kAddRoute);
}

TEST(StateDiffTest, ListsExactlyWhatDiffers) {
  NodePlan node = RingNode(0);
  NodeState desired = DesiredState(node);
  NodeState current = desired;
  current.links[0].mtu = 1500;
  current.links[1].addresses = {*InterfaceAddress::Parse("198.18.0.7/24")};  // stale, wrong twin
  current.routes.erase(current.routes.begin());
  current.routes.push_back(RouteState{*Cidr::Parse("198.18.9.0/24"), Ipv4::Parse("198.18.0.2"),
                                      "enp1s0f0np0", 100});
  current.routes.push_back(RouteState{*Cidr::Parse("198.18.0.0/24"), std::nullopt,
                                      "enp1s0f0np0", 0});  // connected: ignored
  current.routes.push_back(RouteState{*Cidr::Parse("0.0.0.0/0"), Ipv4::Parse("192.0.2.1"),
                                      "enP7s7", 0});  // management: out of scope
  current.sysctls["net.ipv4.conf.all.rp_filter"] = "2";
  EXPECT_EQ(Lines(DiffState(current, desired)),
            (std::vector<std::string>{
                "set-sysctl: net.ipv4.conf.all.rp_filter: 2 -> 0 | "
                "sysctl -w net.ipv4.conf.all.rp_filter=0",
                "set-mtu: enp1s0f0np0: mtu 1500 -> 9000 | ip link set dev enp1s0f0np0 mtu 9000",
                "remove-address: enP2p1s0f0np0: remove 198.18.0.7/24 | "
                "ip addr del 198.18.0.7/24 dev enP2p1s0f0np0",
                "add-address: enP2p1s0f0np0: add 198.18.1.1/24 | "
                "ip addr replace 198.18.1.1/24 dev enP2p1s0f0np0",
                "remove-route: remove route 198.18.9.0/24 via 198.18.0.2 dev enp1s0f0np0 "
                "metric 100 | ip route del 198.18.9.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
                "add-route: add route 198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100 | "
                "ip route replace 198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
            }));
}

TEST(StateDiffTest, MissingNetdevHasNoCommand) {
  NodePlan node = RingNode(1);
  NodeState current = DesiredState(node);
  current.links.pop_back();
  std::vector<Change> changes = DiffState(current, DesiredState(node));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, ChangeKind::kMissingNetdev);
  EXPECT_FALSE(changes[0].command);
}

TEST(StateDiffTest, RollbackIsTheDiffBack) {
  NodePlan node = RingNode(2);
  NodeState before;
  for (const FabricInterface& fi : node.addressing.interfaces) {
    before.links.push_back(LinkState{fi.netdev, 1500, true, {}});
  }
  NodeState after = DesiredState(node);
  std::vector<Change> back = DiffState(after, before);
  int removed_routes = 0, removed_addresses = 0, mtus = 0;
  for (const Change& c : back) {
    removed_routes += c.kind == ChangeKind::kRemoveRoute;
    removed_addresses += c.kind == ChangeKind::kRemoveAddress;
    mtus += c.kind == ChangeKind::kSetMtu;
  }
  EXPECT_EQ(removed_routes, static_cast<int>(node.addressing.routes.size()));
  EXPECT_EQ(removed_addresses, 4);
  EXPECT_EQ(mtus, 4);
}

}  // namespace
}  // namespace spark::netplan
