// Helpers for the simulator's root tests: host snapshots (to prove destroy leaves nothing
// behind), SSH into nodes with the real client and strict host-key checking, shell commands.
#pragma once

#include <set>
#include <string>

#include "base/process.h"
#include "sparkctl/sim/simulator.h"

namespace spark::sim::testing {

bool HaveRoot();

// What the host shows of namespaces, links, mounts and processes in other network namespaces.
struct HostSnapshot {
  std::set<std::string> netns;
  std::set<std::string> links;
  std::set<std::string> mounts;
  std::set<int> foreign_pids;
};
HostSnapshot TakeSnapshot();
// Gives netns teardown a moment, then compares; returns "" when equal or what differs. Objects
// of other simulated clusters (other tests or people on the same host) are left out.
std::string DiffAfterDestroy(const HostSnapshot& before, const std::string& cluster, int slot);

// /bin/sh -c command on the host.
CommandResult Sh(const std::string& command);

// ssh root@node command, StrictHostKeyChecking=yes against the cluster's known_hosts.
CommandResult Ssh(const SeedFiles& seeds, const NodeState& node, const std::string& command);

// Pings `address` from inside `netns` through `dev` (one packet, 1 s). True on a reply.
bool Ping(const std::string& netns, const std::string& dev, const std::string& address);

// The MAC that answers ARP for `address` on `dev` (after flushing the neighbour cache): proves
// which netdev is at the other end of the wire, even where Linux's weak-host ARP would make a
// plain ping pass or fail for other reasons. "" when nobody answers.
std::string PeerMac(const std::string& netns, const std::string& dev, const std::string& address);

}  // namespace spark::sim::testing
