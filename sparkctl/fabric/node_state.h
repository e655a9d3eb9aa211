// Node snapshots: what `sparkctl net plan/apply/reset` reads from a node before it changes
// anything, in ONE SSH round trip: `ip -j addr`, `ip -j route`, the values of the sysctls the
// plan sets, the WireGuard key kept on the node, which of sparkctl's files exist (SHA-256 and
// mode), the RoCE GID tables of the RDMA devices (for NCCL_IB_GID_INDEX), and the address the
// SSH session came in on (the management path, never touched).
//
// The raw `ip -j` sections are kept so that apply can save the state before its first change on
// the node (/etc/sparkctl/fabric/pre-apply.snapshot) and reset can parse it back later.
// Pure parsing and command text; no I/O. Thread-safety: values.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "netplan/state_diff.h"
#include "sparkctl/host/facts.h"

namespace spark::fabric {

// Where sparkctl keeps its state on a node (persistent, per node) and its runtime files
// (rollback script and timer; lost at reboot, which is right: a reboot loads the old files).
inline constexpr char kStateDir[] = "/etc/sparkctl/fabric";
inline constexpr char kRunDir[] = "/run/sparkctl/fabric";
inline constexpr char kWgKeyPath[] = "/etc/sparkctl/fabric/wg-private.key";
inline constexpr char kSavedSnapshotPath[] = "/etc/sparkctl/fabric/pre-apply.snapshot";

struct NetdevInfo {
  std::string name;
  std::string mac;        // "02:00:00:00:01:00"
  std::string operstate;  // "UP", "DOWN", "LOWERLAYERDOWN", "UNKNOWN"
  bool up = false;        // administratively up (flag UP)
  int mtu = 0;
  std::vector<netplan::InterfaceAddress> ipv4;
};

struct FileInfo {
  std::string sha256;  // lower-case hex
  int mode = 0;        // permission bits
};

struct NodeSnapshot {
  std::vector<NetdevInfo> netdevs;           // every netdev of the node
  std::vector<netplan::RouteState> routes;   // IPv4 main table, every netdev
  std::map<std::string, std::string> sysctls;
  std::string wg_private_key;  // "" when the node has none yet
  std::string wg_public_key;
  std::map<std::string, FileInfo> files;  // only the files that exist
  bool has_saved_snapshot = false;        // pre-apply.snapshot exists on the node
  std::string ssh_server_address;         // from $SSH_CONNECTION: the management address
  // RDMA devices with their GID tables (name and gids only), read from sysfs as
  // `sparkctl node facts` reads them.
  std::vector<host::RdmaDeviceFacts> rdma;

  // The raw sections, as read (for SavedSnapshotText).
  std::string addr_json;
  std::string route_json;
  std::string sysctl_text;

  const NetdevInfo* FindNetdev(std::string_view name) const;
  // The netdev carrying `address` ("" when none does).
  std::string NetdevWithAddress(std::string_view address) const;
  const host::RdmaDeviceFacts* FindRdma(std::string_view name) const;
};

// What to read besides addresses and routes.
struct SnapshotRequest {
  std::vector<std::string> sysctl_keys;
  std::vector<std::string> files;
  bool read_wg_key = true;
  bool read_gids = true;
};

// Shell text printing the "gids" section: one line per GID entry that has a type,
// "<device> <index> <gid> <type>" from /sys/class/infiniband/*/ports/1/{gids,gid_attrs/types}.
std::string GidSectionCommand();

// One shell command printing every section ("@@sparkctl <name>" marker lines). Changes nothing.
std::string SnapshotCommand(const SnapshotRequest& request);

// Parses SnapshotCommand's output (or a saved snapshot, which has only addr, route and sysctl).
// InvalidArgument naming the section that is not valid JSON.
Result<NodeSnapshot> ParseSnapshot(std::string_view text);

// The addr, route and sysctl sections only, in SnapshotCommand's format (never key material).
std::string SavedSnapshotText(const NodeSnapshot& snapshot);

// The snapshot as netplan's NodeState, limited to `netdevs` (links and routes on them): the only
// part of a node that sparkctl's diffs may touch.
netplan::NodeState ToNodeState(const NodeSnapshot& snapshot, const std::set<std::string>& netdevs);

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace spark::fabric
