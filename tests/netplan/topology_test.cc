#include "netplan/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using ::testing::HasSubstr;
using namespace ::spark::netplan::testing;  // NOLINT

TEST(TopologyTest, RingCablesLeavePortZeroOfEachRank) {
  auto topo = BuildTopology(MakeRing(4));
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->names, (std::vector<std::string>{"spark-0", "spark-1", "spark-2", "spark-3"}));
  ASSERT_EQ(topo->cables.size(), 4u);
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(topo->cables[e].index, e);
    EXPECT_EQ(topo->cables[e].a.rank, e);
    EXPECT_EQ(topo->cables[e].a.port, 0);
    EXPECT_EQ(topo->cables[e].b.rank, (e + 1) % 4);
    EXPECT_EQ(topo->cables[e].b.port, 1);
  }
  EXPECT_EQ(topo->CableAt(0, 1), &topo->cables[3]);
}

TEST(TopologyTest, LineHasNoClosingCable) {
  auto topo = BuildTopology(MakeLine(4));
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->cables.size(), 3u);
  EXPECT_EQ(topo->CableAt(3, 0), nullptr);
  EXPECT_EQ(topo->CableAt(0, 1), nullptr);
}

TEST(TopologyTest, PairWithTwoCablesNumbersThemByRankZerosPort) {
  ClusterSpec spec = MakePair(/*two_cables=*/true);
  auto topo = BuildTopology(spec);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  ASSERT_EQ(topo->cables.size(), 2u);
  EXPECT_EQ(topo->cables[0].a.port, 0);
  EXPECT_EQ(topo->cables[1].a.port, 1);
  EXPECT_EQ(topo->cables[1].a.rank, 0);  // p1<->p1: the lower rank is the a end
}

TEST(TopologyTest, PairCabledP1ToP0PutsThePortZeroEndFirst) {
  ClusterSpec spec = MakePair();
  Unplug(&spec, 0, 0);
  Plug(&spec, 0, 1, 1, 0);
  auto topo = BuildTopology(spec);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  ASSERT_EQ(topo->cables.size(), 1u);
  EXPECT_EQ(topo->cables[0].a.rank, 1);
  EXPECT_EQ(topo->cables[0].a.port, 0);
  EXPECT_EQ(topo->cables[0].b.rank, 0);
  EXPECT_EQ(topo->cables[0].b.port, 1);
}

TEST(TopologyTest, RingWithP0ToP0SaysWhichEndToMove) {
  ClusterSpec spec = MakeRing(4);
  // spark-1 p0 plugged into spark-2 p0 instead of p1; spark-2 p1 is left empty.
  Plug(&spec, 1, 0, 2, 0);
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(topo.status().message(),
              HasSubstr("rank 1 (spark-1) p0 should be cabled to rank 2 (spark-2) p1, but is "
                        "cabled to rank 2 (spark-2) p0; move the cable end at rank 2 (spark-2) "
                        "p0 to p1 (p0<->p0 on a ring fails later with ibv_modify_qp error 110)"));
}

TEST(TopologyTest, RingWithMissingCableNamesIt) {
  ClusterSpec spec = MakeRing(3);
  Unplug(&spec, 2, 0);
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(),
              HasSubstr("rank 2 (spark-2) p0 should be cabled to rank 0 (spark-0) p1, but "
                        "nothing is plugged in"));
}

TEST(TopologyTest, RingCabledOutOfRankOrderIsRejected) {
  ClusterSpec spec = MakeRing(4);
  Plug(&spec, 0, 0, 2, 1);  // skips rank 1
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(),
              HasSubstr("rank 0 (spark-0) p0 should be cabled to rank 1 (spark-1) p1, but is "
                        "cabled to rank 2 (spark-2) p1; re-run `sparkctl discover`"));
}

TEST(TopologyTest, ClosedLineIsARing) {
  ClusterSpec spec = MakeRing(4);
  spec.fabric.kind = TopologyKind::kLine;
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(),
              HasSubstr("line: rank 3 (spark-3) p0 is the open end and should be unplugged, but "
                        "is cabled to rank 0 (spark-0) p1; this is a closed ring: set "
                        "fabric.kind: ring"));
}

TEST(TopologyTest, SwitchedRejectsDirectCables) {
  ClusterSpec spec = MakeSwitched(3);
  Plug(&spec, 0, 1, 2, 0);
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(),
              HasSubstr("switched: rank 0 (spark-0) p1 is cabled directly to rank 2 (spark-2) "
                        "p0"));
}

TEST(TopologyTest, PairWithoutCable) {
  ClusterSpec spec = MakePair();
  Unplug(&spec, 0, 0);
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(),
              HasSubstr("pair: no cable between rank 0 (spark-0) and rank 1 (spark-1)"));
}

TEST(TopologyTest, MissingRanksOrKindAreFailedPrecondition) {
  ClusterSpec spec = MakeRing(3);
  for (NodeSpec& node : spec.nodes) node.rank.reset();
  EXPECT_EQ(BuildTopology(spec).status().code(), StatusCode::kFailedPrecondition);
  spec = MakeRing(3);
  spec.fabric.kind.reset();
  EXPECT_EQ(BuildTopology(spec).status().code(), StatusCode::kFailedPrecondition);
}

TEST(TopologyTest, InvalidSpecIsReportedByField) {
  ClusterSpec spec = MakeRing(3);
  spec.nodes[0].address = "not an address";
  auto topo = BuildTopology(spec);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(), HasSubstr("nodes[0].address"));
}

TEST(TopologyTest, SingleNodeHasNoFabric) {
  ClusterSpec spec = MakeSwitched(2);
  spec.nodes.pop_back();
  spec.nodes[0].rank = 0;
  spec.fabric.kind = TopologyKind::kSingle;
  EXPECT_THAT(BuildTopology(spec).status().message(), HasSubstr("no fabric to plan"));
}

}  // namespace
}  // namespace spark::netplan
