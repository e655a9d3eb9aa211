// RoutePlan: which neighbour each rank's slice arrives from and where it goes next, for the
// one-shot all-reduce (transport.h) on the cabling of a DGX Spark cluster.
//
//   mesh  every pair of ranks has a link (a switched fabric, a pair, threads on loopback): each
//         slice travels one hop, straight from its source.
//   ring  rank r has links to r-1 ("left") and r+1 ("right") only, as the switchless DAC ring
//         cables them: a slice travels clockwise to the ceil((n-1)/2) ranks after its source and
//         counter-clockwise to the floor((n-1)/2) before it, each neighbour relaying it onward,
//         so every rank receives every other rank's slice exactly once, over the shorter side.
//   line  a ring without the closing cable: slices travel to both ends.
// Two ranks are always a mesh of one link. Pure; no I/O. Thread-safety: values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::comm::oneshot {

enum class Topology { kMesh, kRing, kLine };

std::string_view TopologyName(Topology topology);
// "mesh", "ring" or "line"; InvalidArgument naming the accepted values.
Result<Topology> ParseTopology(std::string_view name);

struct RoutePlan {
  int rank = 0;
  int world = 1;
  Topology topology = Topology::kMesh;
  // Link index -> the rank at its other end. Ring and line: link 0 is the left neighbour
  // (rank - 1) and link 1 the right one (rank + 1) where they exist; mesh: one link per other
  // rank in rank order.
  std::vector<int> peers;
  // By source rank (unused for this rank): the link its slice arrives on, the links this rank
  // forwards it to, and how many hops it travelled to get here.
  std::vector<int> arrives_on;
  std::vector<std::vector<int>> forward_to;
  std::vector<int> hops;

  int link_count() const { return static_cast<int>(peers.size()); }
  // The neighbour a slice from `source` arrives through (the source itself when adjacent).
  int Via(int source) const { return peers[arrives_on[source]]; }
  // The link to `peer`, or -1 when it is not a neighbour.
  int LinkTo(int peer) const;
  // The largest hop count of any slice here: the transport's latency in wire hops.
  int MaxHops() const;
  // "rank 2 (relayed through rank 1)" or "rank 1" for error messages.
  std::string Describe(int source) const;
};

// InvalidArgument for world < 1, rank outside [0, world), or more than 64 ranks.
Result<RoutePlan> BuildRoute(int rank, int world, Topology topology);

}  // namespace spark::comm::oneshot
