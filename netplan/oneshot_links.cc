#include "netplan/oneshot_links.h"

#include "base/strings.h"

namespace spark::netplan {
namespace {

// Twin a's address and both twins' rails of the port whose cable leads to `peer_rank`, or of
// `port` when peer_rank is negative.
Status AddLink(const NodePlan& node, int peer_rank, int port, const std::string& gid,
               OneShotLinks* out) {
  const NodeAddressing& a = node.addressing;
  const FabricInterface* twin_a = nullptr;
  for (const FabricInterface& fi : a.interfaces) {
    const bool match = peer_rank >= 0 ? fi.peer_rank == peer_rank : fi.port == port;
    if (match && twin_a == nullptr) twin_a = &fi;
  }
  if (twin_a == nullptr) {
    return FailedPreconditionError(
        a.name + ": no addressed cable to " +
        (peer_rank >= 0 ? "rank " + std::to_string(peer_rank) : "port p" + std::to_string(port)) +
        " in the fabric plan: check the cable and run `sparkctl discover` and `sparkctl net "
        "apply`");
  }
  out->addresses.push_back(twin_a->address.ip.ToString());
  std::vector<std::string> rails;
  for (int twin = 0; twin < 2; ++twin) {
    if (const FabricInterface* fi = a.FindInterface(twin_a->port, twin)) {
      rails.push_back(fi->rdma_device + ":" + gid);
    }
  }
  out->rails.push_back(rails);
  return Status::Ok();
}

}  // namespace

std::string OneShotLinks::AddressesFlag() const { return Join(addresses, ","); }

std::string OneShotLinks::RailsFlag() const {
  std::vector<std::string> links;
  for (const auto& r : rails) links.push_back(Join(r, "+"));
  return Join(links, ",");
}

Result<OneShotLinks> PlanOneShotLinks(const FabricPlan& plan, int rank) {
  const int n = static_cast<int>(plan.nodes.size());
  if (rank < 0 || rank >= n) {
    return InvalidArgumentError("rank " + std::to_string(rank) + " is not in the fabric plan (" +
                                std::to_string(n) + " nodes)");
  }
  if (n < 2) return InvalidArgumentError("a one-node cluster has no one-shot links");
  const NodePlan& node = plan.nodes[rank];
  const std::string gid = node.Env("NCCL_IB_GID_INDEX").empty() ? "3"
                                                                : node.Env("NCCL_IB_GID_INDEX");
  OneShotLinks out;
  switch (node.kind) {
    case TopologyKind::kRing:
    case TopologyKind::kLine: {
      const bool ring = node.kind == TopologyKind::kRing;
      out.topology = ring ? "ring" : "line";
      if (ring || rank > 0) SPARK_RETURN_IF_ERROR(AddLink(node, (rank + n - 1) % n, -1, gid, &out));
      if (ring || rank < n - 1) SPARK_RETURN_IF_ERROR(AddLink(node, (rank + 1) % n, -1, gid, &out));
      break;
    }
    case TopologyKind::kPair:
      out.topology = "mesh";
      SPARK_RETURN_IF_ERROR(AddLink(node, 1 - rank, -1, gid, &out));
      break;
    case TopologyKind::kSwitched:
      out.topology = "mesh";
      SPARK_RETURN_IF_ERROR(AddLink(node, -1, 0, gid, &out));
      break;
    case TopologyKind::kSingle:
      return InvalidArgumentError("a single node has no one-shot links");
  }
  return out;
}

}  // namespace spark::netplan
