// Cluster specs and plan inputs for the netplan tests: rings, lines, pairs and switched fabrics
// cabled the way `sparkctl discover` would record them. Nodes are listed in reverse rank order
// on purpose, so that nothing depends on the inventory order.
#pragma once

#include <string>

#include "netplan/cluster_spec.h"
#include "netplan/plan_inputs.h"

namespace spark::netplan::testing {

// "spark-<rank>".
std::string NodeName(int rank);

// Ring: p0 of rank r to p1 of rank (r+1) % n.
ClusterSpec MakeRing(int n);
// Line: as the ring without the cable from rank n-1 back to rank 0.
ClusterSpec MakeLine(int n);
// Pair: p0 <-> p0, plus p1 <-> p1 when `two_cables`.
ClusterSpec MakePair(bool two_cables = false);
// Switched: no direct cables.
ClusterSpec MakeSwitched(int n);

// Plugs (a, port_a) to (b, port_b), replacing whatever both ends had.
void Plug(ClusterSpec* spec, int rank_a, int port_a, int rank_b, int port_b);
// Unplugs (rank, port) and its peer.
void Unplug(ClusterSpec* spec, int rank, int port);

// GID index 3, management interface enP7s7, fixed WireGuard test keys (made with `wg genkey`).
PlanInputs MakeInputs(const ClusterSpec& spec);

}  // namespace spark::netplan::testing
