#include "sparkctl/sim/cabling_plan.h"

#include <gtest/gtest.h>

#include "sparkctl/sim/network.h"

namespace spark::sim {
namespace {

std::vector<std::string> Describe(const std::vector<Cable>& cables) {
  std::vector<std::string> out;
  for (const Cable& c : cables)
    out.push_back(std::to_string(c.a.rank) + "p" + std::to_string(c.a.port) + "-" +
                  std::to_string(c.b.rank) + "p" + std::to_string(c.b.port));
  return out;
}

TEST(TopologyTest, ParsesNamesAndSuggests) {
  EXPECT_EQ(*ParseTopology("ring"), Topology::kRing);
  EXPECT_EQ(*ParseTopology("switched"), Topology::kSwitched);
  Result<Topology> bad = ParseTopology("rng");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("did you mean 'ring'"), std::string::npos);
}

TEST(TopologyTest, NodeCountLimits) {
  EXPECT_TRUE(ValidateNodeCount(Topology::kPair, 2).ok());
  EXPECT_FALSE(ValidateNodeCount(Topology::kPair, 3).ok());
  EXPECT_FALSE(ValidateNodeCount(Topology::kRing, 2).ok());
  EXPECT_TRUE(ValidateNodeCount(Topology::kRing, 8).ok());
  EXPECT_FALSE(ValidateNodeCount(Topology::kSwitched, 9).ok());
  EXPECT_TRUE(ValidateNodeCount(Topology::kLine, 2).ok());
}

struct CableCase {
  Topology topology;
  int nodes;
  std::vector<std::string> want;
};

TEST(TopologyTest, PlansCables) {
  const std::vector<CableCase> cases = {
      {Topology::kPair, 2, {"0p0-1p0"}},
      {Topology::kRing, 3, {"0p0-1p1", "1p0-2p1", "2p0-0p1"}},
      {Topology::kRing, 4, {"0p0-1p1", "1p0-2p1", "2p0-3p1", "3p0-0p1"}},
      {Topology::kLine, 3, {"0p0-1p1", "1p0-2p1"}},
      {Topology::kSwitched, 4, {}},
  };
  for (const CableCase& c : cases)
    EXPECT_EQ(Describe(PlanCables(c.topology, c.nodes)), c.want) << TopologyName(c.topology);
}

TEST(TopologyTest, FabricNamesAreTheSparkNames) {
  EXPECT_EQ(FabricNetdev(0, 0), "enp1s0f0np0");
  EXPECT_EQ(FabricNetdev(0, 1), "enP2p1s0f0np0");
  EXPECT_EQ(FabricNetdev(1, 0), "enp1s0f1np1");
  EXPECT_EQ(FabricNetdev(1, 1), "enP2p1s0f1np1");
  EXPECT_EQ(RdmaDevice(1, 1), "roceP2p1s0f1");
}

TEST(WiringTest, RingCablesJoinNeighbourTwins) {
  Wiring w = ComputeWiring(Topology::kRing, 3, {});
  EXPECT_EQ(w["n0p0t0"].bridge, "c0t0");
  EXPECT_EQ(w["n1p1t0"].bridge, "c0t0");
  EXPECT_EQ(w["n1p1t1"].bridge, "c0t1");
  EXPECT_EQ(w["n0p1t1"].bridge, "c2t1");
  for (const auto& [end, state] : w) EXPECT_TRUE(state.up) << end;
}

TEST(WiringTest, PairLeavesPortOneDark) {
  Wiring w = ComputeWiring(Topology::kPair, 2, {});
  EXPECT_EQ(w["n0p1t0"].bridge, "");
  EXPECT_FALSE(w["n0p1t0"].up);
  EXPECT_TRUE(w["n1p0t1"].up);
}

TEST(WiringTest, UnplugTakesCarrierFromBothEnds) {
  FabricFaults f;
  f.unplugged.insert({1, 1});
  Wiring w = ComputeWiring(Topology::kRing, 4, f);
  EXPECT_FALSE(w["n1p1t0"].up);
  EXPECT_FALSE(w["n0p0t1"].up);  // the other end of the same cable
  EXPECT_TRUE(w["n1p0t0"].up);
  std::vector<std::string> diff = WiringDiff(ComputeWiring(Topology::kRing, 4, {}), w);
  EXPECT_EQ(diff.size(), 4u);
  EXPECT_EQ(diff[0], "link set dev n0p0t0 down");
}

TEST(WiringTest, UnplugOnSwitchOnlyAffectsTheNode) {
  FabricFaults f;
  f.unplugged.insert({2, 0});
  Wiring w = ComputeWiring(Topology::kSwitched, 4, f);
  EXPECT_FALSE(w["n2p0t0"].up);
  EXPECT_TRUE(w["n1p0t0"].up);
  EXPECT_EQ(w["n1p0t0"].bridge, "rail0t0");
}

TEST(WiringTest, SwapCrossesTwinsAndUndoes) {
  FabricFaults f;
  f.swapped.insert({0, 0});
  Wiring swapped = ComputeWiring(Topology::kPair, 2, f);
  EXPECT_EQ(swapped["n0p0t0"].bridge, "c0t1");
  EXPECT_EQ(swapped["n0p0t1"].bridge, "c0t0");
  std::vector<std::string> diff = WiringDiff(swapped, ComputeWiring(Topology::kPair, 2, {}));
  EXPECT_EQ(diff, (std::vector<std::string>{"link set dev n0p0t0 master c0t0",
                                            "link set dev n0p0t1 master c0t1"}));
}

TEST(WiringTest, MiscableMakesFirstCableP0P0) {
  FabricFaults f;
  f.miscabled = true;
  Wiring w = ComputeWiring(Topology::kRing, 4, f);
  EXPECT_EQ(w["n0p0t0"].bridge, w["n1p0t0"].bridge);  // cable 0 now p0-p0
  EXPECT_EQ(w["n1p1t0"].bridge, w["n2p1t0"].bridge);  // cable 1 now p1-p1
}

TEST(WiringTest, FreshCreationAttachesAndRaisesEveryCabledEnd) {
  std::vector<std::string> lines = WiringDiff({}, ComputeWiring(Topology::kLine, 2, {}));
  EXPECT_EQ(lines.size(), 8u);  // two twins x two ends x (master, up)
}

TEST(PlanClusterTest, NamesAndAddresses) {
  ClusterState c = PlanCluster("demo", Topology::kRing, 3, 2);
  EXPECT_EQ(c.bridge, "sim2-mgmt");
  EXPECT_EQ(c.nodes[1].netns, "sparksim-demo-spark-1");
  EXPECT_EQ(c.nodes[1].mgmt_address, "198.19.2.11");
  EXPECT_EQ(c.HostAddress(), "198.19.2.1");
  EXPECT_LE(c.nodes[0].host_veth.size(), 15u);
  EXPECT_EQ(*c.FindNode("2"), &c.nodes[2]);
  EXPECT_FALSE(c.FindNode("spark-9").ok());
}

}  // namespace
}  // namespace spark::sim
