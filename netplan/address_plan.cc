#include "netplan/address_plan.h"

namespace spark::netplan {
namespace {

int SubnetsNeeded(const Topology& topo, const AddressOptions& options) {
  if (topo.kind == TopologyKind::kSwitched) return 2 * options.switched_ports;
  return 2 * static_cast<int>(topo.cables.size());
}

std::string TooSmall(const Cidr& block, const Topology& topo, int need) {
  int bits = 0;
  while ((1 << bits) < need) ++bits;
  std::string what = topo.kind == TopologyKind::kSwitched
                         ? "one per rail"
                         : std::to_string(topo.cables.size()) + " cables, two per cable";
  uint64_t holds = block.prefix > 24 ? 0 : uint64_t{1} << (24 - block.prefix);
  return "fabric.cidr " + block.ToString() + " is too small: a " +
         std::string(TopologyName(topo.kind)) + " of " + std::to_string(topo.node_count()) +
         " nodes needs " + std::to_string(need) + " /24 subnets (" + what + ") and " +
         block.ToString() + " holds " + std::to_string(holds) + "; use a /" +
         std::to_string(24 - bits) + " or larger";
}

Result<std::vector<Cidr>> CutSubnets(const ClusterSpec& spec, const Topology& topo,
                                     const AddressOptions& options) {
  SPARK_ASSIGN_OR_RETURN(Cidr block, Cidr::Parse(EffectiveFabricCidr(spec)));
  int need = SubnetsNeeded(topo, options);
  std::vector<Cidr> subnets;
  for (int i = 0; i < need; ++i) {
    std::optional<Cidr> subnet = block.Subnet(24, i);
    if (!subnet) return InvalidArgumentError(TooSmall(block, topo, need));
    subnets.push_back(*subnet);
  }
  return subnets;
}

FabricInterface MakeInterface(int port, int twin, int subnet_index, const Cidr& subnet, int host) {
  FabricInterface fi;
  fi.port = port;
  fi.twin = twin;
  fi.netdev = kPortTwins[port][twin].netdev;
  fi.rdma_device = kPortTwins[port][twin].rdma_device;
  fi.subnet_index = subnet_index;
  fi.address = InterfaceAddress{subnet.Host(host), subnet.prefix};
  return fi;
}

// Pair, line, ring: each node's interfaces on the cables it has, with the peer's address.
void AddCableInterfaces(const Topology& topo, const std::vector<Cidr>& subnets,
                        NodeAddressing* node) {
  for (int port = 0; port < 2; ++port) {
    const Cable* cable = topo.CableAt(node->rank, port);
    if (!cable) continue;
    bool is_a = cable->a.rank == node->rank && cable->a.port == port;
    const CableEnd& peer = is_a ? cable->b : cable->a;
    for (int twin = 0; twin < 2; ++twin) {
      int index = 2 * cable->index + twin;
      FabricInterface fi = MakeInterface(port, twin, index, subnets[index], is_a ? 1 : 2);
      fi.peer_rank = peer.rank;
      fi.peer_address = subnets[index].Host(is_a ? 2 : 1);
      node->interfaces.push_back(fi);
    }
  }
}

void AddRailInterfaces(const std::vector<Cidr>& subnets, NodeAddressing* node) {
  for (int rail = 0; rail < static_cast<int>(subnets.size()); ++rail) {
    node->interfaces.push_back(
        MakeInterface(rail / 2, rail % 2, rail, subnets[rail], node->rank + 1));
  }
}

// Hops from `rank` leaving through `port` until the first node on `cable`; nullopt when that
// side does not lead there (an open end of a line, or an unplugged port).
std::optional<int> HopsVia(const Topology& topo, int rank, int port, const Cable& cable) {
  if (!topo.CableAt(rank, port)) return std::nullopt;
  int n = topo.node_count();
  if (topo.kind == TopologyKind::kRing) {
    return port == 0 ? (cable.a.rank - rank + n) % n : (rank - cable.b.rank + n) % n;
  }
  if (port == 0 && cable.a.rank > rank) return cable.a.rank - rank;
  if (port == 1 && cable.b.rank < rank) return rank - cable.b.rank;
  return std::nullopt;
}

void AddRoutesVia(const NodeAddressing& node, int port, const Cable& cable,
                  const std::vector<Cidr>& subnets, int metric, std::vector<Route>* routes) {
  for (int twin = 0; twin < 2; ++twin) {
    const FabricInterface* out = node.FindInterface(port, twin);
    routes->push_back(Route{subnets[2 * cable.index + twin], *out->peer_address, out->netdev,
                            metric});
  }
}

// The side (port) a node's primary route to `cable` leaves through: fewer hops, port 0 on a tie.
std::optional<int> PrimarySide(const Topology& topo, int rank, const Cable& cable) {
  std::optional<int> via0 = HopsVia(topo, rank, 0, cable);
  std::optional<int> via1 = HopsVia(topo, rank, 1, cable);
  if (!via0 && !via1) return std::nullopt;
  return !via1 || (via0 && *via0 <= *via1) ? 0 : 1;
}

// A backup route over `side` is loop-free only if the neighbour there keeps going the same way
// (or owns the cable): otherwise it would send the packet straight back to us. Nodes further on
// keep that direction too, since their distance that way only shrinks.
bool BackupIsLoopFree(const Topology& topo, int rank, int side, const Cable& cable) {
  const Cable* link = topo.CableAt(rank, side);
  int neighbour = link->a.rank == rank && link->a.port == side ? link->b.rank : link->a.rank;
  if (cable.a.rank == neighbour || cable.b.rank == neighbour) return true;
  return PrimarySide(topo, neighbour, cable) == side;
}

void AddRoutes(const Topology& topo, const std::vector<Cidr>& subnets, NodeAddressing* node) {
  for (const Cable& cable : topo.cables) {
    if (cable.a.rank == node->rank || cable.b.rank == node->rank) continue;  // adjacent
    int primary = *PrimarySide(topo, node->rank, cable);
    AddRoutesVia(*node, primary, cable, subnets, kPrimaryRouteMetric, &node->routes);
    int other = 1 - primary;
    if (HopsVia(topo, node->rank, other, cable) &&
        BackupIsLoopFree(topo, node->rank, other, cable)) {
      AddRoutesVia(*node, other, cable, subnets, kBackupRouteMetric, &node->routes);
    }
  }
}

}  // namespace

const FabricInterface* NodeAddressing::FindInterface(int port, int twin) const {
  for (const FabricInterface& fi : interfaces) {
    if (fi.port == port && fi.twin == twin) return &fi;
  }
  return nullptr;
}

Result<AddressPlan> BuildAddressPlan(const ClusterSpec& spec, const AddressOptions& options) {
  if (options.switched_ports < 1 || options.switched_ports > 2) {
    return InvalidArgumentError("switched_ports must be 1 or 2, not " +
                                std::to_string(options.switched_ports));
  }
  AddressPlan plan;
  SPARK_ASSIGN_OR_RETURN(plan.topology, BuildTopology(spec));
  SPARK_ASSIGN_OR_RETURN(plan.fabric, Cidr::Parse(EffectiveFabricCidr(spec)));
  SPARK_ASSIGN_OR_RETURN(plan.subnets, CutSubnets(spec, plan.topology, options));
  const Topology& topo = plan.topology;
  for (int rank = 0; rank < topo.node_count(); ++rank) {
    NodeAddressing node{topo.names[rank], rank, {}, {}};
    if (topo.kind == TopologyKind::kSwitched) {
      AddRailInterfaces(plan.subnets, &node);
    } else {
      AddCableInterfaces(topo, plan.subnets, &node);
      AddRoutes(topo, plan.subnets, &node);
    }
    plan.nodes.push_back(std::move(node));
  }
  return plan;
}

}  // namespace spark::netplan
