#include "netplan/state_diff.h"

#include <algorithm>
#include <set>

namespace spark::netplan {
namespace {

template <typename T>
bool Has(const std::vector<T>& items, const T& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

const LinkState* FindLink(const NodeState& state, std::string_view netdev) {
  for (const LinkState& link : state.links) {
    if (link.netdev == netdev) return &link;
  }
  return nullptr;
}

std::string RouteText(const RouteState& r) {
  return r.to.ToString() + " via " + r.via->ToString() + " dev " + r.dev + " metric " +
         std::to_string(r.metric);
}

Command RouteCommand(std::string verb, const RouteState& r) {
  return Command{{"ip", "route", std::move(verb), r.to.ToString(), "via", r.via->ToString(),
                  "dev", r.dev, "metric", std::to_string(r.metric)},
                 false};
}

void DiffSysctls(const NodeState& current, const NodeState& desired, std::vector<Change>* out) {
  for (const auto& [key, value] : desired.sysctls) {
    auto it = current.sysctls.find(key);
    std::string was = it == current.sysctls.end() ? "(unknown)" : it->second;
    if (was == value) continue;
    out->push_back({ChangeKind::kSetSysctl, key + ": " + was + " -> " + value,
                    Command{{"sysctl", "-w", key + "=" + value}, false}});
  }
}

void DiffLink(const LinkState& now, const LinkState& want, std::vector<Change>* out) {
  const std::string& dev = want.netdev;
  if (now.mtu != want.mtu) {
    out->push_back({ChangeKind::kSetMtu,
                    dev + ": mtu " + std::to_string(now.mtu) + " -> " + std::to_string(want.mtu),
                    Command{{"ip", "link", "set", "dev", dev, "mtu", std::to_string(want.mtu)}}});
  }
  if (now.up != want.up) {
    std::string verb = want.up ? "up" : "down";
    out->push_back({ChangeKind::kSetUp, dev + ": " + verb,
                    Command{{"ip", "link", "set", "dev", dev, verb}}});
  }
  for (const InterfaceAddress& a : now.addresses) {
    if (Has(want.addresses, a)) continue;
    out->push_back({ChangeKind::kRemoveAddress, dev + ": remove " + a.ToString(),
                    Command{{"ip", "addr", "del", a.ToString(), "dev", dev}}});
  }
  for (const InterfaceAddress& a : want.addresses) {
    if (Has(now.addresses, a)) continue;
    out->push_back({ChangeKind::kAddAddress, dev + ": add " + a.ToString(),
                    Command{{"ip", "addr", "replace", a.ToString(), "dev", dev}}});
  }
}

void DiffRoutes(const NodeState& current, const NodeState& desired, std::vector<Change>* out) {
  std::set<std::string> managed;
  for (const LinkState& link : desired.links) managed.insert(link.netdev);
  for (const RouteState& r : current.routes) {
    if (!r.via || !managed.count(r.dev) || Has(desired.routes, r)) continue;
    out->push_back({ChangeKind::kRemoveRoute, "remove route " + RouteText(r),
                    RouteCommand("del", r)});
  }
  for (const RouteState& r : desired.routes) {
    if (!r.via || Has(current.routes, r)) continue;
    out->push_back({ChangeKind::kAddRoute, "add route " + RouteText(r),
                    RouteCommand("replace", r)});
  }
}

}  // namespace

std::string_view ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kMissingNetdev: return "missing-netdev";
    case ChangeKind::kSetSysctl: return "set-sysctl";
    case ChangeKind::kSetMtu: return "set-mtu";
    case ChangeKind::kSetUp: return "set-up";
    case ChangeKind::kAddAddress: return "add-address";
    case ChangeKind::kRemoveAddress: return "remove-address";
    case ChangeKind::kAddRoute: return "add-route";
    case ChangeKind::kRemoveRoute: return "remove-route";
  }
  return "?";
}

NodeState DesiredState(const NodePlan& plan) {
  NodeState state;
  for (const FabricInterface& fi : plan.addressing.interfaces) {
    state.links.push_back(LinkState{fi.netdev, plan.mtu, true, {fi.address}});
  }
  for (const Route& r : plan.addressing.routes) {
    state.routes.push_back(RouteState{r.to, r.via, r.dev, r.metric});
  }
  for (const Sysctl& s : plan.sysctls) state.sysctls[s.key] = s.value;
  return state;
}

std::vector<Change> DiffState(const NodeState& current, const NodeState& desired) {
  std::vector<Change> out;
  DiffSysctls(current, desired, &out);
  for (const LinkState& want : desired.links) {
    const LinkState* now = FindLink(current, want.netdev);
    if (!now) {
      out.push_back({ChangeKind::kMissingNetdev,
                     want.netdev + ": netdev not present (driver not loaded, or renamed?)",
                     std::nullopt});
      continue;
    }
    DiffLink(*now, want, &out);
  }
  DiffRoutes(current, desired, &out);
  return out;
}

}  // namespace spark::netplan
