// ClusterSpec: the plain model of a cluster inventory (schema sparkctl-cluster/v1), shared by
// the netplan library (which renders fabric plans from it) and sparkctl (which reads and writes
// it as cluster.yaml, see sparkctl/inventory/cluster_yaml.h and docs/cluster.md).
//
// Pure data plus Validate(); no I/O. A seed inventory (as `sparkctl sim create` writes it) has
// only the SSH settings and each node's name and address; `sparkctl discover` fills in machine
// ids, ranks, cabling and the fabric kind.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/field_errors.h"

namespace spark::netplan {

inline constexpr char kClusterSchema[] = "sparkctl-cluster/v1";

enum class TopologyKind { kSingle, kPair, kRing, kLine, kSwitched };

std::string_view TopologyName(TopologyKind kind);
std::optional<TopologyKind> ParseTopology(std::string_view name);
// Node counts a topology allows: single 1, pair 2, ring 3..8, line 2..8, switched 2..8.
int MinNodes(TopologyKind kind);
int MaxNodes(TopologyKind kind);

// The DGX Spark's two QSFP ports; each is two PCIe "twins" (netdev + RDMA device).
inline constexpr const char* kPortNames[] = {"p0", "p1"};
struct TwinNames {
  const char* netdev;
  const char* rdma_device;
};
// Twins of port 0 and port 1, in the order NCCL_IB_HCA lists them.
inline constexpr TwinNames kPortTwins[2][2] = {
    {{"enp1s0f0np0", "rocep1s0f0"}, {"enP2p1s0f0np0", "roceP2p1s0f0"}},
    {{"enp1s0f1np1", "rocep1s0f1"}, {"enP2p1s0f1np1", "roceP2p1s0f1"}},
};

struct PortPeer {
  std::string node;  // peer node name
  std::string port;  // "p0" or "p1"
};

struct PortSpec {
  std::string name;              // "p0" or "p1"
  std::optional<PortPeer> peer;  // empty: nothing plugged (or not discovered yet)
};

struct NodeSpec {
  std::string name;        // hostname
  std::string address;     // management address used for SSH
  std::string machine_id;  // /etc/machine-id, filled by discover
  std::optional<int> rank;
  std::vector<PortSpec> ports;
};

struct SshSpec {
  std::string user = "root";
  int port = 22;
  std::string identity_file;  // empty: ssh-agent, then ~/.ssh/id_ed25519, id_rsa
  std::string known_hosts;    // empty: ~/.ssh/known_hosts
  int connect_timeout_s = 5;
  int command_timeout_s = 60;
};

// The fabric block when cluster.yaml names none. It grows to a /20 (same base) when the cabling
// needs more than four cables' worth of /24 subnets; see EffectiveFabricCidr().
inline constexpr char kDefaultFabricCidr[] = "198.18.0.0/21";

struct FabricSpec {
  std::optional<TopologyKind> kind;  // empty until discovered
  std::string cidr = kDefaultFabricCidr;
  int mtu = 9000;
};

struct ControlPlaneSpec {
  std::string cidr = "10.253.255.0/29";
  int port = 51871;
};

struct ClusterSpec {
  std::string schema = kClusterSchema;
  std::string name;
  SshSpec ssh;
  std::vector<NodeSpec> nodes;
  FabricSpec fabric;
  ControlPlaneSpec control_plane;

  const NodeSpec* FindNode(std::string_view name) const;
  // Number of cables the fabric kind implies for the node count (pair 1, ring N, line N-1).
  int CableCount() const;
};

// The shortest prefix length that holds `cables` cables at two /24 subnets each (one per twin):
// 4 cables -> /21, 5..8 -> /20. Switched fabrics need one /24 per rail: 4 rails -> /22.
int RequiredFabricPrefix(TopologyKind kind, int cables);

// The fabric block plans are cut from: fabric.cidr as given, except that the default
// 198.18.0.0/21 becomes 198.18.0.0/20 when the kind and node count need a /20 (more than four
// cables). A block the user chose is never widened: too small is an error.
std::string EffectiveFabricCidr(const ClusterSpec& spec);

// Checks everything that can be checked without the network: unique names/addresses/ids,
// addresses well formed, cabling symmetric and consistent with the fabric kind, node count within
// the kind's range, CIDR blocks well formed and large enough, MTU and ports in range.
void Validate(const ClusterSpec& spec, FieldErrors* errors);

}  // namespace spark::netplan
