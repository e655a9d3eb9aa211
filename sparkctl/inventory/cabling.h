// Cabling detection: from the identity beacons every node heard on its fabric links, work out
// which port is cabled to which, the topology (pair, ring, line, switched), the ring order and
// rank 0 — and every miscabling, named as the exact cable to move.
//
// Pure: no I/O. `sparkctl discover` runs the beacons on all nodes and feeds the reports here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "netplan/cluster_spec.h"
#include "sparkctl/host/beacon.h"

namespace spark::inventory {

struct Cable {
  std::string a_node, a_port;  // a: the lower rank (ring: the node whose p0 it leaves)
  std::string b_node, b_port;
  bool twins_crossed = false;  // twin a of one end lands on twin b of the other
  int twins_linked = 0;        // 0..2 twins that carried beacons
};

struct CablingProblem {
  std::string node;
  std::string port;     // "" when about the node as a whole
  std::string message;  // what is wrong and which cable to move
};

struct CablingResult {
  std::optional<netplan::TopologyKind> kind;  // empty when no consistent topology was found
  std::vector<std::string> order;             // node names by rank
  std::vector<Cable> cables;
  std::vector<CablingProblem> problems;

  bool ok() const { return kind.has_value() && problems.empty(); }
};

// `names[i]` is the inventory name of the node that produced `reports[i]`. Rank 0 is names[0]
// (the first node of the inventory); the ring direction follows port 0 of rank 0 when it can.
CablingResult InferCabling(const std::vector<std::string>& names,
                           const std::vector<host::BeaconReport>& reports);

// Writes ranks, ports with peers and the fabric kind into the inventory (nodes are matched by
// name), keeping everything else.
void ApplyCabling(const CablingResult& result, netplan::ClusterSpec* spec);

// "ring: spark-0 -> spark-1 -> spark-2 -> spark-3 -> spark-0".
std::string DescribeTopology(const CablingResult& result);

}  // namespace spark::inventory
