// OneShotLinks: what a rank's one-shot transport (comm/oneshot) connects over, from the fabric
// plan: the transport's topology and, for each of its links in the transport's order, the
// local address that link's socket uses and the RDMA rails (both twins of the port the link's
// cable is on, with the node's RoCE v2 GID index).
//   ring, line  link 0 is the cable to rank - 1 (port 1 on a ring), link 1 the cable to
//               rank + 1 (port 0); the line's end ranks have one link. Non-adjacent ranks are
//               relayed by the transport itself, not routed by the kernel.
//   pair        one link: the port 0 cable (a second cable is left to NCCL).
//   switched    a mesh over port 0: every peer through the switch, from the rail-0 address.
// Rendered as spark-bench and spark-engine flags: addresses "A,B", rails "dev:gid+dev:gid,...".
// Pure; no I/O. Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/node_plan.h"

namespace spark::netplan {

struct OneShotLinks {
  std::string topology;                       // "ring", "line" or "mesh"
  std::vector<std::string> addresses;         // by link; one address for every link of a mesh
  std::vector<std::vector<std::string>> rails;  // by link: "rocep1s0f1:3", ...
  std::string AddressesFlag() const;  // "198.18.6.2,198.18.0.1"
  std::string RailsFlag() const;      // "rocep1s0f1:3+roceP2p1s0f1:3,rocep1s0f0:3+..."
};

// FailedPrecondition naming the node and the cable when a link's port has no address in the
// plan (a cable not plugged or not discovered); InvalidArgument for a rank not in the plan or a
// single-node plan.
Result<OneShotLinks> PlanOneShotLinks(const FabricPlan& plan, int rank);

}  // namespace spark::netplan
