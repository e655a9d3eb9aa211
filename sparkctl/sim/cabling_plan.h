// Topology planning for the cluster simulator: which ports are cabled to which, and how the
// patch panel (a private "wires" namespace holding one bridge per cable twin or switch rail)
// connects the nodes' fabric netdevs, including the cabling faults (unplug, swap, miscable).
//
// Everything here is pure: no I/O, so plans and fault effects are unit-tested directly.
// Thread-safety: functions only; values may be shared between threads.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace spark::sim {

enum class Topology { kPair, kRing, kLine, kSwitched };

inline constexpr int kMinNodes = 2;
inline constexpr int kMaxNodes = 8;
inline constexpr int kPorts = 2;  // QSFP ports per Spark
inline constexpr int kTwins = 2;  // PCIe "twins" per port

// "pair", "ring", "line", "switched". InvalidArgument (with a suggestion) for anything else.
Result<Topology> ParseTopology(std::string_view name);
std::string_view TopologyName(Topology topology);

// InvalidArgument when `nodes` does not suit the topology (pair: 2; ring: 3..8; line and
// switched: 2..8).
Status ValidateNodeCount(Topology topology, int nodes);

// DGX Spark names: port 0 = enp1s0f0np0 (twin 0) + enP2p1s0f0np0 (twin 1), port 1 likewise.
std::string_view FabricNetdev(int port, int twin);
// rocep1s0f0, roceP2p1s0f0, rocep1s0f1, roceP2p1s0f1 (same indexing as FabricNetdev).
std::string_view RdmaDevice(int port, int twin);
inline constexpr std::string_view kMgmtNetdev = "enP7s7";

// The hostname of rank r: "spark-<r>".
std::string NodeName(int rank);

struct PortRef {
  int rank = 0;
  int port = 0;
  friend auto operator<=>(const PortRef&, const PortRef&) = default;
};

// One DAC cable between two ports; it carries both twins.
struct Cable {
  PortRef a;
  PortRef b;
};

// The cables a topology needs (switched: none, every port goes to the switch). Ring: port 0 of
// rank r to port 1 of rank r+1 (mod n); line: the ring without the closing cable; pair: p0<->p0.
// Call ValidateNodeCount first.
std::vector<Cable> PlanCables(Topology topology, int nodes);

// Cabling faults in force; what `sim fault` toggles.
struct FabricFaults {
  std::set<PortRef> unplugged;  // cable pulled at this port (both ends lose carrier)
  std::set<PortRef> swapped;    // the cable's twins are crossed at this port
  bool miscabled = false;       // ring's first cable turned into p0-p0 (rank 1's ports swapped)
};

// The wires-namespace end of a node's fabric netdev: "n<rank>p<port>t<twin>".
std::string WireEndName(int rank, int port, int twin);

// Desired state of every wire end: the bridge it joins ("" = none) and whether it is up.
struct WireEndState {
  std::string bridge;
  bool up = false;
};
using Wiring = std::map<std::string, WireEndState>;

// Every bridge in the wires namespace: "c<cable>t<twin>" per cable twin or "rail<p>t<t>".
std::vector<std::string> PlanBridges(Topology topology, int nodes);

// The wiring for a topology with faults applied.
Wiring ComputeWiring(Topology topology, int nodes, const FabricFaults& faults);

// `ip -batch` lines that turn wiring `from` into `to` (an empty `from` means freshly created,
// unattached, down ends).
std::vector<std::string> WiringDiff(const Wiring& from, const Wiring& to);

}  // namespace spark::sim
