#include "netplan/address_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using ::testing::HasSubstr;
using namespace ::spark::netplan::testing;  // NOLINT

std::vector<std::string> Addresses(const NodeAddressing& node) {
  std::vector<std::string> out;
  for (const FabricInterface& fi : node.interfaces) {
    out.push_back(fi.netdev + " " + fi.address.ToString());
  }
  return out;
}

std::vector<std::string> Routes(const NodeAddressing& node) {
  std::vector<std::string> out;
  for (const Route& r : node.routes) {
    out.push_back(r.to.ToString() + " via " + r.via.ToString() + " dev " + r.dev + " metric " +
                  std::to_string(r.metric));
  }
  return out;
}

// Worked by hand from FIELD_NOTES (the same table is in docs/netplan.md): cable e leaves p0 of
// rank e and gets 198.18.2e.0/24 (twin a) and 198.18.(2e+1).0/24 (twin b); the p0 end is .1.
TEST(AddressPlanTest, FourRingMatchesTheHandWorkedTable) {
  auto plan = BuildAddressPlan(MakeRing(4));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->fabric.ToString(), "198.18.0.0/21");
  ASSERT_EQ(plan->subnets.size(), 8u);
  EXPECT_EQ(plan->subnets[7].ToString(), "198.18.7.0/24");
  EXPECT_EQ(Addresses(plan->nodes[0]),
            (std::vector<std::string>{"enp1s0f0np0 198.18.0.1/24", "enP2p1s0f0np0 198.18.1.1/24",
                                      "enp1s0f1np1 198.18.6.2/24",
                                      "enP2p1s0f1np1 198.18.7.2/24"}));
  EXPECT_EQ(Routes(plan->nodes[0]),
            (std::vector<std::string>{
                "198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
                "198.18.3.0/24 via 198.18.1.2 dev enP2p1s0f0np0 metric 100",
                "198.18.2.0/24 via 198.18.6.1 dev enp1s0f1np1 metric 200",
                "198.18.3.0/24 via 198.18.7.1 dev enP2p1s0f1np1 metric 200",
                "198.18.4.0/24 via 198.18.6.1 dev enp1s0f1np1 metric 100",
                "198.18.5.0/24 via 198.18.7.1 dev enP2p1s0f1np1 metric 100",
                "198.18.4.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 200",
                "198.18.5.0/24 via 198.18.1.2 dev enP2p1s0f0np0 metric 200",
            }));
  EXPECT_EQ(Addresses(plan->nodes[2]),
            (std::vector<std::string>{"enp1s0f0np0 198.18.4.1/24", "enP2p1s0f0np0 198.18.5.1/24",
                                      "enp1s0f1np1 198.18.2.2/24",
                                      "enP2p1s0f1np1 198.18.3.2/24"}));
  EXPECT_EQ(Routes(plan->nodes[2]),
            (std::vector<std::string>{
                "198.18.0.0/24 via 198.18.2.1 dev enp1s0f1np1 metric 100",
                "198.18.1.0/24 via 198.18.3.1 dev enP2p1s0f1np1 metric 100",
                "198.18.0.0/24 via 198.18.4.2 dev enp1s0f0np0 metric 200",
                "198.18.1.0/24 via 198.18.5.2 dev enP2p1s0f0np0 metric 200",
                "198.18.6.0/24 via 198.18.4.2 dev enp1s0f0np0 metric 100",
                "198.18.7.0/24 via 198.18.5.2 dev enP2p1s0f0np0 metric 100",
                "198.18.6.0/24 via 198.18.2.1 dev enp1s0f1np1 metric 200",
                "198.18.7.0/24 via 198.18.3.1 dev enP2p1s0f1np1 metric 200",
            }));
}

TEST(AddressPlanTest, DefaultBlockGrowsToSlash20AboveFourCables) {
  auto plan = BuildAddressPlan(MakeRing(6));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->fabric.ToString(), "198.18.0.0/20");
  EXPECT_EQ(plan->subnets.back().ToString(), "198.18.11.0/24");
  EXPECT_EQ(plan->nodes[5].interfaces[0].address.ToString(), "198.18.10.1/24");
}

TEST(AddressPlanTest, UserBlockIsUsedAsGiven) {
  ClusterSpec spec = MakeRing(3);
  spec.fabric.cidr = "10.77.16.0/20";
  auto plan = BuildAddressPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->nodes[1].interfaces[0].address.ToString(), "10.77.18.1/24");
  EXPECT_EQ(plan->nodes[1].interfaces[2].address.ToString(), "10.77.16.2/24");
}

TEST(AddressPlanTest, TooSmallUserBlockIsRejected) {
  ClusterSpec spec = MakeRing(6);
  spec.fabric.cidr = "10.77.0.0/21";  // not the default: never widened
  auto plan = BuildAddressPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("fabric.cidr: 10.77.0.0/21 is too small for 6 nodes in a ring; use a /20"));
}

TEST(AddressPlanTest, TooSmallBlockForATwoCablePairSaysHowManySubnets) {
  ClusterSpec spec = MakePair(/*two_cables=*/true);
  spec.fabric.cidr = "198.18.0.0/23";  // enough for the one cable Validate() assumes
  auto plan = BuildAddressPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "fabric.cidr 198.18.0.0/23 is too small: a pair of 2 nodes needs 4 /24 subnets "
            "(2 cables, two per cable) and 198.18.0.0/23 holds 2; use a /22 or larger");
}

TEST(AddressPlanTest, SwitchedRailsGiveRankPlusOne) {
  auto plan = BuildAddressPlan(MakeSwitched(3));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Addresses(plan->nodes[2]),
            (std::vector<std::string>{"enp1s0f0np0 198.18.0.3/24", "enP2p1s0f0np0 198.18.1.3/24",
                                      "enp1s0f1np1 198.18.2.3/24",
                                      "enP2p1s0f1np1 198.18.3.3/24"}));
  EXPECT_TRUE(plan->nodes[2].routes.empty());
  auto one_port = BuildAddressPlan(MakeSwitched(3), AddressOptions{.switched_ports = 1});
  ASSERT_TRUE(one_port.ok());
  EXPECT_EQ(one_port->nodes[0].interfaces.size(), 2u);
}

TEST(AddressPlanTest, PairHasNoRoutes) {
  auto plan = BuildAddressPlan(MakePair());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Addresses(plan->nodes[1]),
            (std::vector<std::string>{"enp1s0f0np0 198.18.0.2/24",
                                      "enP2p1s0f0np0 198.18.1.2/24"}));
  EXPECT_TRUE(plan->nodes[0].routes.empty());
}

TEST(AddressPlanTest, LineRoutesOnlyTowardsTheCable) {
  auto plan = BuildAddressPlan(MakeLine(4));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Routes(plan->nodes[0]),
            (std::vector<std::string>{
                "198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
                "198.18.3.0/24 via 198.18.1.2 dev enP2p1s0f0np0 metric 100",
                "198.18.4.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
                "198.18.5.0/24 via 198.18.1.2 dev enP2p1s0f0np0 metric 100",
            }));
  EXPECT_EQ(plan->nodes[3].interfaces.size(), 2u);  // the open end has p1 only
  EXPECT_EQ(plan->nodes[3].interfaces[0].netdev, "enp1s0f1np1");
}

}  // namespace
}  // namespace spark::netplan
