#include "comm/oneshot/route.h"

#include <algorithm>

namespace spark::comm::oneshot {
namespace {

constexpr int kMaxRanks = 64;

// Ring and line: the slice of `source` reaches `rank` going clockwise (through the left link)
// after `cw` hops, or counter-clockwise (through the right link) after `ccw` hops.
void RouteNeighbours(RoutePlan& plan) {
  const int n = plan.world, r = plan.rank;
  const bool ring = plan.topology == Topology::kRing;
  const int left = ring || r > 0 ? (r + n - 1) % n : -1;
  const int right = ring || r < n - 1 ? (r + 1) % n : -1;
  if (left >= 0) plan.peers.push_back(left);
  if (right >= 0) plan.peers.push_back(right);
  const int left_link = left >= 0 ? 0 : -1;
  const int right_link = right >= 0 ? (left >= 0 ? 1 : 0) : -1;
  // Ring: clockwise to the ceil((n-1)/2) ranks after the source, counter-clockwise to the rest.
  const int reach_cw = (n - 1 + 1) / 2;
  for (int s = 0; s < n; ++s) {
    if (s == r) continue;
    int cw = (r - s + n) % n;  // hops going right from s to r
    bool from_left;
    if (ring) {
      from_left = cw <= reach_cw;
    } else {
      from_left = s < r;
      cw = std::abs(r - s);
    }
    const int hops = from_left ? cw : (ring ? n - cw : std::abs(r - s));
    plan.hops[s] = hops;
    plan.arrives_on[s] = from_left ? left_link : right_link;
    // Forward onward in the same direction while the slice has further to go.
    const bool more = ring ? (from_left ? hops < reach_cw : hops < n - 1 - reach_cw)
                           : (from_left ? right >= 0 : left >= 0);
    if (more) plan.forward_to[s].push_back(from_left ? right_link : left_link);
  }
}

}  // namespace

std::string_view TopologyName(Topology topology) {
  switch (topology) {
    case Topology::kMesh: return "mesh";
    case Topology::kRing: return "ring";
    case Topology::kLine: return "line";
  }
  return "?";
}

Result<Topology> ParseTopology(std::string_view name) {
  if (name == "mesh") return Topology::kMesh;
  if (name == "ring") return Topology::kRing;
  if (name == "line") return Topology::kLine;
  return InvalidArgumentError("one-shot topology \"" + std::string(name) +
                              "\": use mesh (switched or pair), ring or line");
}

int RoutePlan::LinkTo(int peer) const {
  for (int l = 0; l < link_count(); ++l) {
    if (peers[l] == peer) return l;
  }
  return -1;
}

int RoutePlan::MaxHops() const {
  int most = 0;
  for (int s = 0; s < world; ++s) {
    if (s != rank) most = std::max(most, hops[s]);
  }
  return most;
}

std::string RoutePlan::Describe(int source) const {
  std::string text = "rank " + std::to_string(source);
  if (source != rank && hops[source] > 1) {
    text += " (relayed through rank " + std::to_string(Via(source)) + ")";
  }
  return text;
}

Result<RoutePlan> BuildRoute(int rank, int world, Topology topology) {
  if (world < 1 || world > kMaxRanks) {
    return InvalidArgumentError("one-shot group of " + std::to_string(world) +
                                " ranks: use 1 to " + std::to_string(kMaxRanks));
  }
  if (rank < 0 || rank >= world) {
    return InvalidArgumentError("one-shot rank " + std::to_string(rank) + " outside [0, " +
                                std::to_string(world) + ")");
  }
  RoutePlan plan;
  plan.rank = rank;
  plan.world = world;
  // Two ranks have one cable (or one link) whatever the fabric: a mesh of one link.
  plan.topology = world <= 2 ? Topology::kMesh : topology;
  plan.arrives_on.assign(world, -1);
  plan.forward_to.assign(world, {});
  plan.hops.assign(world, 0);
  if (plan.topology == Topology::kMesh) {
    for (int s = 0; s < world; ++s) {
      if (s == rank) continue;
      plan.arrives_on[s] = plan.link_count();
      plan.hops[s] = 1;
      plan.peers.push_back(s);
    }
    return plan;
  }
  RouteNeighbours(plan);
  return plan;
}

}  // namespace spark::comm::oneshot
