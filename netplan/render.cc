#include "netplan/render.h"

#include <cstdio>

namespace spark::netplan {
namespace {

std::string Quote(const std::string& text) { return "\"" + text + "\""; }

std::string Header(const NodePlan& plan, std::string_view comment) {
  return std::string(comment) + " sparkctl fabric plan for " + plan.addressing.name + ", rank " +
         std::to_string(plan.addressing.rank) + " of " +
         std::string(TopologyName(plan.kind)) + " cluster \"" + plan.cluster + "\".\n" +
         std::string(comment) + " Written by `sparkctl net apply`; edits are overwritten.\n";
}

void RenderEthernet(const NodePlan& plan, const FabricInterface& fi, std::string* out) {
  *out += "    " + fi.netdev + ":\n";
  *out += "      optional: true\n";  // boot does not wait for a fabric cable
  *out += "      mtu: " + std::to_string(plan.mtu) + "\n";
  *out += "      addresses:\n        - " + Quote(fi.address.ToString()) + "\n";
  bool first = true;
  for (const Route& route : plan.addressing.routes) {
    if (route.dev != fi.netdev) continue;
    if (first) *out += "      routes:\n";
    first = false;
    *out += "        - to: " + Quote(route.to.ToString()) + "\n";
    *out += "          via: " + Quote(route.via.ToString()) + "\n";
    *out += "          metric: " + std::to_string(route.metric) + "\n";
  }
}

void RenderTunnel(const WireGuardPlan& wg, std::string* out) {
  *out += "  tunnels:\n";
  *out += "    " + wg.interface + ":\n";
  *out += "      mode: wireguard\n";
  *out += "      port: " + std::to_string(wg.listen_port) + "\n";
  *out += "      key: " + Quote(wg.private_key) + "\n";
  *out += "      addresses:\n        - " + Quote(wg.address.ToString()) + "\n";
  *out += "      peers:\n";
  for (const WireGuardPeer& peer : wg.peers) {
    *out += "        - keys:\n            public: " + Quote(peer.public_key) + "\n";
    *out += "          allowed-ips:\n            - " + Quote(peer.allowed_ip.ToString()) + "\n";
    *out += "          endpoint: " + Quote(peer.endpoint) + "\n";
    *out += "          keepalive: " + std::to_string(wg.keepalive_s) + "\n";
  }
}

Command Cmd(std::vector<std::string> argv, bool ignore_failure = false) {
  return Command{std::move(argv), ignore_failure};
}

std::vector<std::string> RouteArgs(std::string verb, const Route& r) {
  return {"ip", "route", std::move(verb), r.to.ToString(), "via", r.via.ToString(),
          "dev", r.dev, "metric", std::to_string(r.metric)};
}

void AppendSection(std::string title, const std::string& body, std::string* out) {
  *out += "### " + title + "\n" + body;
  if (!body.empty() && body.back() != '\n') *out += "\n";
  *out += "\n";
}

std::string CommandLines(const std::vector<Command>& commands) {
  std::string out;
  for (const Command& c : commands) {
    out += c.ToString() + (c.ignore_failure ? "  # failure ignored" : "") + "\n";
  }
  return out;
}

}  // namespace

std::string RenderNetplanYaml(const NodePlan& plan) {
  std::string out = Header(plan, "#");
  out += "# Only fabric netdevs are listed: the management interface is never touched.\n";
  out += "network:\n  version: 2\n  renderer: networkd\n";
  if (!plan.addressing.interfaces.empty()) out += "  ethernets:\n";
  for (const FabricInterface& fi : plan.addressing.interfaces) RenderEthernet(plan, fi, &out);
  if (plan.wireguard) RenderTunnel(*plan.wireguard, &out);
  return out;
}

std::string RenderSysctlConf(const NodePlan& plan) {
  if (plan.sysctls.empty()) return "";
  std::string out = Header(plan, "#");
  for (const Sysctl& s : plan.sysctls) out += "# " + s.why + "\n" + s.key + " = " + s.value + "\n";
  return out;
}

std::string WireGuardConfPath(const WireGuardPlan& wg) {
  return "/etc/wireguard/" + wg.interface + ".conf";
}

std::string RenderWireGuardConf(const WireGuardPlan& wg) {
  std::string out = "# sparkctl control plane; load with `wg setconf " + wg.interface + " " +
                    WireGuardConfPath(wg) + "`.\n";
  out += "[Interface]\nPrivateKey = " + wg.private_key + "\n";
  out += "ListenPort = " + std::to_string(wg.listen_port) + "\n";
  for (const WireGuardPeer& peer : wg.peers) {
    out += "\n[Peer]\n# " + peer.name +
           (peer.endpoint_on_fabric ? " (directly attached: fabric address)\n"
                                    : " (not adjacent: management address)\n");
    out += "PublicKey = " + peer.public_key + "\n";
    out += "AllowedIPs = " + peer.allowed_ip.ToString() + "\n";
    out += "Endpoint = " + peer.endpoint + "\n";
    out += "PersistentKeepalive = " + std::to_string(wg.keepalive_s) + "\n";
  }
  return out;
}

std::string RenderNcclEnv(const NodePlan& plan) {
  std::string out;
  for (const EnvVar& var : plan.nccl_env) out += var.name + "=" + var.value + "\n";
  return out;
}

std::vector<FileContent> NodeFiles(const NodePlan& plan) {
  std::vector<FileContent> files = {{kNetplanPath, 0600, RenderNetplanYaml(plan)}};
  if (!plan.sysctls.empty()) files.push_back({kSysctlPath, 0644, RenderSysctlConf(plan)});
  if (plan.wireguard) {
    files.push_back({WireGuardConfPath(*plan.wireguard), 0600,
                     RenderWireGuardConf(*plan.wireguard)});
  }
  return files;
}

std::vector<Command> ApplyCommands(const NodePlan& plan) {
  std::vector<Command> out;
  for (const Sysctl& s : plan.sysctls) out.push_back(Cmd({"sysctl", "-w", s.key + "=" + s.value}));
  for (const FabricInterface& fi : plan.addressing.interfaces) {
    out.push_back(Cmd({"ip", "link", "set", "dev", fi.netdev, "mtu", std::to_string(plan.mtu)}));
    out.push_back(Cmd({"ip", "link", "set", "dev", fi.netdev, "up"}));
    out.push_back(Cmd({"ip", "addr", "replace", fi.address.ToString(), "dev", fi.netdev}));
  }
  for (const Route& r : plan.addressing.routes) out.push_back(Cmd(RouteArgs("replace", r)));
  if (plan.wireguard) {
    const WireGuardPlan& wg = *plan.wireguard;
    out.push_back(Cmd({"ip", "link", "add", "dev", wg.interface, "type", "wireguard"}, true));
    out.push_back(Cmd({"wg", "setconf", wg.interface, WireGuardConfPath(wg)}));
    out.push_back(Cmd({"ip", "addr", "replace", wg.address.ToString(), "dev", wg.interface}));
    out.push_back(Cmd({"ip", "link", "set", "dev", wg.interface, "up"}));
  }
  return out;
}

std::vector<Command> ResetCommands(const NodePlan& plan) {
  std::vector<Command> out;
  if (plan.wireguard) {
    out.push_back(Cmd({"ip", "link", "del", "dev", plan.wireguard->interface}, true));
  }
  const auto& routes = plan.addressing.routes;
  for (auto it = routes.rbegin(); it != routes.rend(); ++it) {
    out.push_back(Cmd(RouteArgs("del", *it), true));
  }
  const auto& ifs = plan.addressing.interfaces;
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it) {
    out.push_back(Cmd({"ip", "addr", "del", it->address.ToString(), "dev", it->netdev}, true));
    out.push_back(
        Cmd({"ip", "link", "set", "dev", it->netdev, "mtu", std::to_string(kDefaultMtu)}));
  }
  return out;
}

std::vector<std::string> ResetFiles(const NodePlan& plan) {
  std::vector<std::string> paths;
  for (const FileContent& file : NodeFiles(plan)) paths.push_back(file.path);
  return paths;
}

std::string RenderNodeBundle(const NodePlan& plan) {
  std::string out;
  for (const FileContent& file : NodeFiles(plan)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", file.mode);
    AppendSection(file.path + " (mode " + mode + ")", file.content, &out);
  }
  AppendSection("NCCL environment", RenderNcclEnv(plan), &out);
  AppendSection("net apply", CommandLines(ApplyCommands(plan)), &out);
  AppendSection("net reset (then remove the files above)", CommandLines(ResetCommands(plan)),
                &out);
  return out;
}

}  // namespace spark::netplan
