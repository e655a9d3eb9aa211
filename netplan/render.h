// Renderers: a NodePlan as the files `sparkctl net apply` writes on the node (persistent state:
// netplan YAML, sysctl.d, WireGuard config) and the commands it runs (runtime state: iproute2,
// sysctl, wg), plus the inverse commands `sparkctl net reset` runs. Deterministic text, golden-
// file tested (tests/netplan/golden). Pure; no I/O.
#pragma once

#include <string>
#include <vector>

#include "netplan/node_command.h"
#include "netplan/node_plan.h"

namespace spark::netplan {

inline constexpr char kNetplanPath[] = "/etc/netplan/60-sparkctl-fabric.yaml";
inline constexpr char kSysctlPath[] = "/etc/sysctl.d/60-sparkctl-fabric.conf";
// The MTU `net reset` restores (the kernel's default for Ethernet).
inline constexpr int kDefaultMtu = 1500;

struct FileContent {
  std::string path;
  int mode = 0644;  // 0600 for files holding the WireGuard private key
  std::string content;
};

// network: {version: 2, renderer: networkd, ethernets: {...}, tunnels: {<wg>: ...}}.
std::string RenderNetplanYaml(const NodePlan& plan);
// sysctl.d lines with a comment giving the reason of each; "" when the plan has no sysctls.
std::string RenderSysctlConf(const NodePlan& plan);
// wg(8) setconf format: [Interface] and one [Peer] per other node.
std::string RenderWireGuardConf(const WireGuardPlan& wg);
std::string WireGuardConfPath(const WireGuardPlan& wg);  // /etc/wireguard/<interface>.conf
// NAME=value lines, in a fixed order.
std::string RenderNcclEnv(const NodePlan& plan);

// The files apply writes (netplan YAML, sysctl.d when non-empty, WireGuard when planned).
std::vector<FileContent> NodeFiles(const NodePlan& plan);
// Runtime: sysctls, then per netdev mtu/up/address, then routes, then WireGuard. Idempotent
// (`replace` verbs) so a second apply changes nothing.
std::vector<Command> ApplyCommands(const NodePlan& plan);
// The inverse, in reverse order: WireGuard link, routes, addresses, MTU back to 1500. Sysctls are
// left as they are at runtime (harmless on an unaddressed netdev; other software may rely on
// ip_forward); removing the sysctl.d file drops them at the next boot.
std::vector<Command> ResetCommands(const NodePlan& plan);
// The files reset removes.
std::vector<std::string> ResetFiles(const NodePlan& plan);

// Everything above for one node as one reviewable text with "### <section>" headers.
std::string RenderNodeBundle(const NodePlan& plan);

}  // namespace spark::netplan
