// Topology: the cables of a ClusterSpec checked against its fabric kind and put in plan order.
//
// Discover fills ranks and cabling; this module checks that the cabling is the one the kind needs
// (ring: port 0 of rank r to port 1 of rank r+1; line: the same without the closing cable; pair:
// one or two cables between the two nodes; switched: no direct cables) and numbers the cables.
// Cable e of a ring or line is the one leaving port 0 of rank e. Each cable has an "a" end, which
// takes host .1 on the cable's subnets, and a "b" end (.2): the a end is the end on port 0 when
// exactly one end is on port 0, else the end on the lower rank. Pure; no I/O.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"

namespace spark::netplan {

struct CableEnd {
  int rank = 0;
  int port = 0;  // 0 = p0, 1 = p1
};

struct Cable {
  int index = 0;  // plan order; cable e gets /24 subnets 2e (twin a) and 2e+1 (twin b)
  CableEnd a;     // host .1
  CableEnd b;     // host .2
};

struct Topology {
  TopologyKind kind = TopologyKind::kRing;
  std::vector<std::string> names;  // node names by rank
  std::vector<Cable> cables;       // by index
  int node_count() const { return static_cast<int>(names.size()); }
  // The cable plugged into (rank, port), or nullptr.
  const Cable* CableAt(int rank, int port) const;
};

// Checks the spec (Validate), that every node has a rank, and that the cabling matches the
// fabric kind. Returns InvalidArgument naming every offending field; FailedPrecondition when
// ranks or the fabric kind are not discovered yet; InvalidArgument for a single-node cluster
// (no fabric to plan). A wrong cable is named with the move that fixes it.
Result<Topology> BuildTopology(const ClusterSpec& spec);

}  // namespace spark::netplan
