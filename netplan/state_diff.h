// State diff: what `sparkctl net plan` shows and `net apply` changes. The caller parses a node's
// current state (`ip -j addr`, `ip -j route`, sysctl values) into NodeState; DesiredState() turns
// a NodePlan into the same shape; DiffState() lists the changes with the commands that make them.
// Rollback uses the same function the other way round: DiffState(now, saved_before_apply).
//
// Only netdevs listed in the desired state are looked at; every other interface (management,
// docker, ...) is out of scope and never appears in a diff. Connected routes (no gateway: the
// kernel adds them with the address) are ignored. WireGuard state is not diffed (apply rewrites
// it whole). Pure; no I/O.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "netplan/node_command.h"
#include "netplan/ipv4.h"
#include "netplan/node_plan.h"

namespace spark::netplan {

struct LinkState {
  std::string netdev;
  int mtu = 1500;
  bool up = false;
  std::vector<InterfaceAddress> addresses;  // IPv4 only
};

struct RouteState {
  Cidr to;
  std::optional<Ipv4> via;  // empty: a connected route (ignored by the diff)
  std::string dev;
  int metric = 0;
  friend bool operator==(const RouteState&, const RouteState&) = default;
};

struct NodeState {
  std::vector<LinkState> links;
  std::vector<RouteState> routes;
  std::map<std::string, std::string> sysctls;  // key -> value; a missing key counts as differing
};

enum class ChangeKind {
  kMissingNetdev,  // the plan needs a netdev the node does not have: nothing can fix it here
  kSetSysctl,
  kSetMtu,
  kSetUp,
  kAddAddress,
  kRemoveAddress,
  kAddRoute,
  kRemoveRoute,
};

std::string_view ChangeKindName(ChangeKind kind);  // "set-mtu", "add-route", ...

struct Change {
  ChangeKind kind;
  std::string description;  // "enp1s0f0np0: mtu 1500 -> 9000"
  std::optional<Command> command;  // empty for kMissingNetdev
};

// The state a node has once the plan is applied (fabric netdevs, routes via neighbours, sysctls).
NodeState DesiredState(const NodePlan& plan);

// Changes that turn `current` into `desired`, in the order they must be applied: sysctls, links
// (mtu, up), addresses (removals first), routes (removals first). Empty when nothing differs.
std::vector<Change> DiffState(const NodeState& current, const NodeState& desired);

}  // namespace spark::netplan
