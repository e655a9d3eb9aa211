// AddressPlan: which fabric netdev of which node gets which address, and which static routes.
//
// Point-to-point kinds (pair, line, ring): two /24 per cable cut from the fabric block, one per
// twin: cable e gets subnet 2e (twin a: enp1s0f*) and 2e+1 (twin b: enP2p1s0f*); the cable's a
// end (see topology.h) is host .1, the b end .2. Ring and line nodes get one route per
// non-adjacent subnet over the side of the ring with fewer hops to that cable (port 0 on a tie),
// via the neighbour's address on the same twin. Rings add the other side as a backup route with
// a higher metric where that is loop-free when the first cable of the primary side is pulled
// (the neighbour on the backup side must not route the subnet back through us); the kernel
// falls back to it through ignore_routes_with_linkdown. A cable pulled further away is not
// routed around: re-plan (docs/netplan.md, "Failures"). Switched: one /24 per rail (rail = 2*port + twin), node of rank r is host r+1,
// no routes. Pure; no I/O. docs/netplan.md has a worked example.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "netplan/ipv4.h"
#include "netplan/topology.h"

namespace spark::netplan {

inline constexpr int kPrimaryRouteMetric = 100;
inline constexpr int kBackupRouteMetric = 200;

struct FabricInterface {
  int port = 0;  // 0 = p0, 1 = p1
  int twin = 0;  // 0 = twin a (PCIe domain 0), 1 = twin b (domain 2)
  std::string netdev;
  std::string rdma_device;
  InterfaceAddress address;
  int subnet_index = 0;              // index into AddressPlan::subnets
  std::optional<int> peer_rank;      // point-to-point kinds: the node at the cable's other end
  std::optional<Ipv4> peer_address;  // and its address on this subnet
};

struct Route {
  Cidr to;
  Ipv4 via;
  std::string dev;
  int metric = kPrimaryRouteMetric;
  friend bool operator==(const Route&, const Route&) = default;
};

struct NodeAddressing {
  std::string name;
  int rank = 0;
  std::vector<FabricInterface> interfaces;  // in kPortTwins order; unplugged ports are absent
  std::vector<Route> routes;  // by cable: both twins' primaries, then both twins' backups

  const FabricInterface* FindInterface(int port, int twin) const;
};

struct AddressPlan {
  Topology topology;
  Cidr fabric;                       // the block subnets are cut from (EffectiveFabricCidr)
  std::vector<Cidr> subnets;         // /24 each, in index order
  std::vector<NodeAddressing> nodes;  // by rank
};

// Options that shape the plan beyond the ClusterSpec.
struct AddressOptions {
  int switched_ports = 2;  // switched fabrics: ports cabled to the switch (1 = p0 only, 2 = both)
};

// Errors: those of BuildTopology(); InvalidArgument when the fabric block cannot hold the
// subnets the cabling needs (the message says how many and which prefix would).
Result<AddressPlan> BuildAddressPlan(const ClusterSpec& spec, const AddressOptions& options = {});

}  // namespace spark::netplan
