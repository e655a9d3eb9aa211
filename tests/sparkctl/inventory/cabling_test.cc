#include "sparkctl/inventory/cabling.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spark::inventory {
namespace {

using host::BeaconReport;
using netplan::kPortTwins;

// Builds the beacon reports a set of cables would produce. A wire joins (node, port, twin) to
// (node, port, twin); both ends hear each other.
struct Wire {
  int a, ap, at, b, bp, bt;
};

std::vector<BeaconReport> Reports(int n, const std::vector<Wire>& wires) {
  std::vector<BeaconReport> reports(n);
  for (int i = 0; i < n; ++i) {
    reports[i].self = {"id" + std::to_string(i), "spark-" + std::to_string(i)};
  }
  for (const Wire& w : wires) {
    auto hear = [&](int me, int mp, int mt, int peer, int pp, int pt) {
      reports[me].sightings.push_back({kPortTwins[mp][mt].netdev, reports[peer].self.machine_id,
                                       reports[peer].self.hostname, kPortTwins[pp][pt].netdev});
    };
    hear(w.a, w.ap, w.at, w.b, w.bp, w.bt);
    hear(w.b, w.bp, w.bt, w.a, w.ap, w.at);
  }
  return reports;
}

// A cable from (a, ap) to (b, bp) with both twins straight.
void Cable(std::vector<Wire>* wires, int a, int ap, int b, int bp) {
  wires->push_back({a, ap, 0, b, bp, 0});
  wires->push_back({a, ap, 1, b, bp, 1});
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("spark-" + std::to_string(i));
  return names;
}

std::vector<Wire> Ring(int n, std::vector<int> order) {
  std::vector<Wire> wires;
  for (int r = 0; r < n; ++r) Cable(&wires, order[r], 0, order[(r + 1) % n], 1);
  return wires;
}

TEST(CablingTest, RingOrderFollowsPortZeroFromTheFirstNode) {
  // Physical order 0 -> 2 -> 1 -> 3 -> 0.
  auto result = InferCabling(Names(4), Reports(4, Ring(4, {0, 2, 1, 3})));
  ASSERT_TRUE(result.ok()) << (result.problems.empty() ? "" : result.problems[0].message);
  EXPECT_EQ(result.kind, netplan::TopologyKind::kRing);
  EXPECT_EQ(result.order, (std::vector<std::string>{"spark-0", "spark-2", "spark-1", "spark-3"}));
  EXPECT_EQ(DescribeTopology(result), "ring: spark-0 -> spark-2 -> spark-1 -> spark-3 -> spark-0");
}

TEST(CablingTest, EightRing) {
  auto result = InferCabling(Names(8), Reports(8, Ring(8, {0, 1, 2, 3, 4, 5, 6, 7})));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.order.size(), 8u);
  EXPECT_EQ(result.cables.size(), 8u);
}

TEST(CablingTest, PortsSwappedOnOneNodeNamesThatNode) {
  // Rank 1's two cables are in each other's ports: 0.p0-1.p0 and 1.p1-2.p1.
  std::vector<Wire> wires;
  Cable(&wires, 0, 0, 1, 0);
  Cable(&wires, 1, 1, 2, 1);
  Cable(&wires, 2, 0, 3, 1);
  Cable(&wires, 3, 0, 0, 1);
  auto result = InferCabling(Names(4), Reports(4, wires));
  EXPECT_FALSE(result.ok());
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_EQ(result.problems[0].node, "spark-1");
  EXPECT_NE(result.problems[0].message.find("swap the two cables at spark-1"), std::string::npos)
      << result.problems[0].message;
  EXPECT_NE(result.problems[0].message.find("error 110"), std::string::npos);
}

TEST(CablingTest, CrossedTwinsAreReported) {
  std::vector<Wire> wires = Ring(3, {0, 1, 2});
  wires[0] = {0, 0, 0, 1, 1, 1};
  wires[1] = {0, 0, 1, 1, 1, 0};
  auto result = InferCabling(Names(3), Reports(3, wires));
  EXPECT_EQ(result.kind, netplan::TopologyKind::kRing);
  ASSERT_FALSE(result.problems.empty());
  EXPECT_NE(result.problems[0].message.find("twins are crossed"), std::string::npos);
}

TEST(CablingTest, MissingTwinIsReported) {
  std::vector<Wire> wires = Ring(3, {0, 1, 2});
  wires.erase(wires.begin() + 1);  // twin b of the first cable
  auto result = InferCabling(Names(3), Reports(3, wires));
  ASSERT_GE(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].message.find("enP2p1s0f0np0 hears nothing"), std::string::npos)
      << result.problems[0].message;
}

TEST(CablingTest, PulledCableMakesALineAndNamesTheMissingCable) {
  std::vector<Wire> wires = Ring(4, {0, 1, 2, 3});
  wires.erase(wires.begin() + 6, wires.end());  // the cable 3.p0 -> 0.p1
  auto result = InferCabling(Names(4), Reports(4, wires));
  EXPECT_EQ(result.kind, netplan::TopologyKind::kLine);
  EXPECT_EQ(result.order, (std::vector<std::string>{"spark-0", "spark-1", "spark-2", "spark-3"}));
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].message.find("cable from spark-3 p0 to spark-0 p1 is missing"),
            std::string::npos)
      << result.problems[0].message;
}

TEST(CablingTest, LineIsOrientedFromItsPortZeroEnd) {
  std::vector<Wire> wires = Ring(4, {0, 1, 2, 3});
  wires.erase(wires.begin() + 2, wires.begin() + 4);  // the cable 1.p0 -> 2.p1
  auto result = InferCabling(Names(4), Reports(4, wires));
  EXPECT_EQ(result.kind, netplan::TopologyKind::kLine);
  EXPECT_EQ(result.order, (std::vector<std::string>{"spark-2", "spark-3", "spark-0", "spark-1"}));
  ASSERT_EQ(result.problems.size(), 1u) << result.problems[0].message;
  EXPECT_NE(result.problems[0].message.find("cable from spark-1 p0 to spark-2 p1 is missing"),
            std::string::npos)
      << result.problems[0].message;
}

TEST(CablingTest, Pair) {
  std::vector<Wire> wires;
  Cable(&wires, 0, 0, 1, 0);
  auto result = InferCabling(Names(2), Reports(2, wires));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.kind, netplan::TopologyKind::kPair);
  netplan::ClusterSpec spec;
  spec.nodes = {{"spark-0", "198.19.0.10", "", std::nullopt, {}},
                {"spark-1", "198.19.0.11", "", std::nullopt, {}}};
  ApplyCabling(result, &spec);
  ASSERT_TRUE(spec.nodes[1].ports[0].peer.has_value());
  EXPECT_EQ(spec.nodes[1].ports[0].peer->node, "spark-0");
  EXPECT_FALSE(spec.nodes[1].ports[1].peer.has_value());
  EXPECT_EQ(spec.nodes[1].rank, 1);
}

TEST(CablingTest, SwitchedWhenAPortHearsSeveralNodes) {
  std::vector<Wire> wires;
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      for (int p = 0; p < 2; ++p) Cable(&wires, a, p, b, p);
    }
  }
  auto result = InferCabling(Names(4), Reports(4, wires));
  ASSERT_TRUE(result.ok()) << result.problems[0].message;
  EXPECT_EQ(result.kind, netplan::TopologyKind::kSwitched);
}

TEST(CablingTest, DuplicateMachineIdIsReported) {
  auto reports = Reports(3, Ring(3, {0, 1, 2}));
  reports[2].self.machine_id = reports[0].self.machine_id;
  auto result = InferCabling(Names(3), reports);
  ASSERT_FALSE(result.problems.empty());
  EXPECT_NE(result.problems[0].message.find("spark-2 has the same machine-id as spark-0"), std::string::npos);
}

TEST(CablingTest, NodeWithNoCablesIsNamed) {
  std::vector<Wire> wires;
  Cable(&wires, 0, 0, 1, 1);
  auto result = InferCabling(Names(3), Reports(3, wires));
  EXPECT_FALSE(result.ok());
  bool named = false;
  for (const auto& p : result.problems) named |= p.message.find("spark-2 hears no other node") != std::string::npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace spark::inventory
