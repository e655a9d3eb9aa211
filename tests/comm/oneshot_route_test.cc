// RoutePlan: for every topology and group size, every rank gets every other rank's slice exactly
// once, along the links the plan's peers describe, over the shorter side of a ring.
#include "comm/oneshot/route.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <vector>

namespace spark::comm::oneshot {
namespace {

struct Case {
  Topology topology;
  int world;
};

class RouteTest : public ::testing::TestWithParam<Case> {};

// Delivers source's slice from rank to rank along the plans and counts receptions per rank.
std::vector<int> Deliver(const std::vector<RoutePlan>& plans, int source) {
  std::vector<int> got(plans.size(), 0);
  std::deque<std::pair<int, int>> hops;  // (from rank, link index at from)
  for (int l = 0; l < plans[source].link_count(); ++l) hops.push_back({source, l});
  while (!hops.empty()) {
    auto [from, link] = hops.front();
    hops.pop_front();
    const int to = plans[from].peers[link];
    EXPECT_GE(plans[to].LinkTo(from), 0) << "rank " << to << " has no link back to " << from;
    EXPECT_EQ(plans[to].arrives_on[source], plans[to].LinkTo(from))
        << "slice of " << source << " reached " << to << " from the wrong neighbour " << from;
    if (++got[to] > 1) continue;
    for (int next : plans[to].forward_to[source]) hops.push_back({to, next});
  }
  return got;
}

TEST_P(RouteTest, EveryRankGetsEverySliceOnceOverTheShorterSide) {
  const auto [topology, n] = GetParam();
  std::vector<RoutePlan> plans;
  for (int r = 0; r < n; ++r) {
    auto plan = BuildRoute(r, n, topology);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plans.push_back(*plan);
  }
  const Topology used = n <= 2 ? Topology::kMesh : topology;
  for (int s = 0; s < n; ++s) {
    std::vector<int> got = Deliver(plans, s);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[r], r == s ? 0 : 1) << "source " << s << " rank " << r;
      if (r == s) continue;
      const int gap = std::abs(r - s);
      const int want = used == Topology::kMesh ? 1 : used == Topology::kLine ? gap
                                                                             : std::min(gap, n - gap);
      EXPECT_EQ(plans[r].hops[s], want) << "source " << s << " rank " << r;
    }
  }
  const int links = used == Topology::kMesh ? n - 1 : used == Topology::kRing ? 2 : -1;
  for (const RoutePlan& p : plans) {
    if (links >= 0) {
      EXPECT_EQ(p.link_count(), links);
    }
    if (used == Topology::kRing) {
      EXPECT_EQ(p.MaxHops(), n / 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Topologies, RouteTest,
    ::testing::Values(Case{Topology::kMesh, 1}, Case{Topology::kMesh, 2}, Case{Topology::kMesh, 4},
                      Case{Topology::kMesh, 8}, Case{Topology::kRing, 2}, Case{Topology::kRing, 3},
                      Case{Topology::kRing, 4}, Case{Topology::kRing, 5}, Case{Topology::kRing, 6},
                      Case{Topology::kRing, 7}, Case{Topology::kRing, 8}, Case{Topology::kLine, 3},
                      Case{Topology::kLine, 4}, Case{Topology::kLine, 8}));

TEST(RouteTest2, RingOfFourRelaysTheOppositeRankThroughTheLeftNeighbour) {
  auto plan = BuildRoute(0, 4, Topology::kRing);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->peers, (std::vector<int>{3, 1}));
  EXPECT_EQ(plan->Describe(2), "rank 2 (relayed through rank 3)");
  EXPECT_EQ(plan->Describe(1), "rank 1");
  EXPECT_TRUE(plan->forward_to[3].size() == 1 && plan->forward_to[3][0] == 1);  // 3 -> 0 -> 1
  EXPECT_TRUE(plan->forward_to[1].empty());
}

TEST(RouteTest2, RefusesBadGroupsAndNames) {
  EXPECT_EQ(BuildRoute(4, 4, Topology::kRing).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildRoute(0, 0, Topology::kRing).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildRoute(0, 65, Topology::kMesh).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTopology("torus").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseTopology("line"), Topology::kLine);
}

}  // namespace
}  // namespace spark::comm::oneshot
