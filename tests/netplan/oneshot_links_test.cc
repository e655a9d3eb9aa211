// PlanOneShotLinks: the one-shot transport's links follow the cables: on a ring link 0 is the
// port-1 cable to rank - 1 and link 1 the port-0 cable to rank + 1, each with both twins as
// RDMA rails and the node's GID index; a pair has one link; a switched fabric a mesh on rail 0.
#include "netplan/oneshot_links.h"

#include <gtest/gtest.h>

#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using namespace ::spark::netplan::testing;  // NOLINT

FabricPlan PlanOf(const ClusterSpec& spec, const PlanInputs& inputs) {
  auto plan = BuildFabricPlan(spec, inputs);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : FabricPlan{};
}

TEST(OneShotLinksTest, RingLinksAreTheCablesToBothNeighbours) {
  ClusterSpec spec = MakeRing(4);
  PlanInputs inputs = MakeInputs(spec);
  inputs.nodes["spark-1"].gid_index = 5;
  FabricPlan plan = PlanOf(spec, inputs);
  auto links = PlanOneShotLinks(plan, 1);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  EXPECT_EQ(links->topology, "ring");
  ASSERT_EQ(links->addresses.size(), 2u);
  // Cable 0 leaves p0 of rank 0 for p1 of rank 1 (198.18.0.0/24, rank 1 is .2); cable 1 leaves
  // p0 of rank 1 (198.18.2.0/24, .1).
  EXPECT_EQ(links->AddressesFlag(), "198.18.0.2,198.18.2.1");
  EXPECT_EQ(links->RailsFlag(), "rocep1s0f1:5+roceP2p1s0f1:5,rocep1s0f0:5+roceP2p1s0f0:5");
  // The address each link uses is on the same subnet as the neighbour's end of that cable.
  auto left = PlanOneShotLinks(plan, 0);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->addresses[1], "198.18.0.1");
}

TEST(OneShotLinksTest, LineEndsHaveOneLink) {
  FabricPlan plan = PlanOf(MakeLine(3), MakeInputs(MakeLine(3)));
  auto first = PlanOneShotLinks(plan, 0);
  auto last = PlanOneShotLinks(plan, 2);
  ASSERT_TRUE(first.ok() && last.ok());
  EXPECT_EQ(first->topology, "line");
  EXPECT_EQ(first->addresses.size(), 1u);
  EXPECT_EQ(last->addresses.size(), 1u);
  EXPECT_EQ(PlanOneShotLinks(plan, 1)->addresses.size(), 2u);
}

TEST(OneShotLinksTest, PairAndSwitchedAreMeshes) {
  FabricPlan pair = PlanOf(MakePair(true), MakeInputs(MakePair(true)));
  auto p = PlanOneShotLinks(pair, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->topology, "mesh");
  EXPECT_EQ(p->AddressesFlag(), "198.18.0.2");
  EXPECT_EQ(p->RailsFlag(), "rocep1s0f0:3+roceP2p1s0f0:3");
  FabricPlan sw = PlanOf(MakeSwitched(4), MakeInputs(MakeSwitched(4)));
  auto s = PlanOneShotLinks(sw, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->topology, "mesh");
  ASSERT_EQ(s->addresses.size(), 1u);
  EXPECT_EQ(s->rails.size(), 1u);
}

TEST(OneShotLinksTest, AMissingCableIsNamed) {
  ClusterSpec spec = MakeLine(4);
  FabricPlan plan = PlanOf(spec, MakeInputs(spec));
  EXPECT_EQ(PlanOneShotLinks(plan, 7).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::netplan
