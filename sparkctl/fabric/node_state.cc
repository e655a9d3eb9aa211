#include "sparkctl/fabric/node_state.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {
namespace {

constexpr std::string_view kMarker = "@@sparkctl ";

// Splits the text into sections keyed by the word after the marker.
std::map<std::string, std::string> Sections(std::string_view text) {
  std::map<std::string, std::string> out;
  std::string* current = nullptr;
  for (const std::string& line : Split(text, '\n')) {
    if (StartsWith(line, kMarker)) {
      current = &out[std::string(Trim(std::string_view(line).substr(kMarker.size())))];
      continue;
    }
    if (current) *current += line + "\n";
  }
  return out;
}

Result<nlohmann::json> ParseJsonSection(const std::map<std::string, std::string>& sections,
                                        const std::string& name) {
  auto it = sections.find(name);
  if (it == sections.end() || Trim(it->second).empty()) return nlohmann::json::array();
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return InvalidArgumentError("node snapshot: section '" + name +
                                "' is not a JSON array (is iproute2 older than 4.14?)");
  }
  return j;
}

NetdevInfo ParseNetdev(const nlohmann::json& j) {
  NetdevInfo n;
  n.name = j.value("ifname", "");
  n.mac = j.value("address", "");
  n.operstate = j.value("operstate", "");
  n.mtu = j.value("mtu", 0);
  for (const auto& flag : j.value("flags", nlohmann::json::array())) {
    if (flag == "UP") n.up = true;
  }
  for (const auto& a : j.value("addr_info", nlohmann::json::array())) {
    if (a.value("family", "") != "inet") continue;
    auto addr = netplan::InterfaceAddress::Parse(a.value("local", "") + "/" +
                                                 std::to_string(a.value("prefixlen", 32)));
    if (addr.ok()) n.ipv4.push_back(*addr);
  }
  return n;
}

std::optional<netplan::RouteState> ParseRoute(const nlohmann::json& j) {
  std::string dst = j.value("dst", "");
  if (dst == "default") dst = "0.0.0.0/0";
  if (dst.find('/') == std::string::npos) dst += "/32";
  auto to = netplan::Cidr::Parse(dst);
  if (!to.ok()) return std::nullopt;
  netplan::RouteState r{*to, std::nullopt, j.value("dev", ""), j.value("metric", 0)};
  if (j.contains("gateway")) r.via = netplan::Ipv4::Parse(j.value("gateway", ""));
  return r;
}

}  // namespace

const NetdevInfo* NodeSnapshot::FindNetdev(std::string_view name) const {
  for (const NetdevInfo& n : netdevs) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::string NodeSnapshot::NetdevWithAddress(std::string_view address) const {
  for (const NetdevInfo& n : netdevs) {
    for (const auto& a : n.ipv4) {
      if (a.ip.ToString() == address) return n.name;
    }
  }
  return "";
}

const host::RdmaDeviceFacts* NodeSnapshot::FindRdma(std::string_view name) const {
  for (const host::RdmaDeviceFacts& d : rdma) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// Unused entries have no readable type (EINVAL on real hardware, absent in the simulator).
std::string GidSectionCommand() {
  return std::string("echo '") + std::string(kMarker) +
         "gids'; for p in /sys/class/infiniband/*/ports/1; do [ -d \"$p/gid_attrs/types\" ] || "
         "continue; d=${p%/ports/1}; d=${d##*/}; for t in \"$p\"/gid_attrs/types/*; do "
         "y=$(cat \"$t\" 2>/dev/null) || continue; [ -n \"$y\" ] || continue; i=${t##*/}; "
         "echo \"$d $i $(cat \"$p/gids/$i\" 2>/dev/null) $y\"; done; done";
}

std::string SnapshotCommand(const SnapshotRequest& request) {
  std::string m(kMarker);
  std::string cmd = "export LC_ALL=C; echo '" + m + "addr'; ip -j addr show; echo '" + m +
                    "route'; ip -j -4 route show table main; echo '" + m + "sysctl'";
  if (!request.sysctl_keys.empty()) {
    cmd += "; sysctl " + Join(request.sysctl_keys, " ") + " 2>/dev/null";
  }
  cmd += "; echo '" + m + "ssh'; echo \"$SSH_CONNECTION\"";
  if (request.read_wg_key) {
    std::string key = kWgKeyPath;
    cmd += "; echo '" + m + "wgkey'; if [ -s " + key + " ]; then cat " + key + "; wg pubkey < " +
           key + "; fi";
  }
  cmd += "; echo '" + m + "files'";
  for (const std::string& f : request.files) {
    cmd += "; [ -e " + f + " ] && echo \"$(stat -c %a " + f + ") $(sha256sum " + f + ")\"";
  }
  if (request.read_gids) cmd += "; " + GidSectionCommand();
  cmd += "; echo '" + m + "saved'; [ -e " + std::string(kSavedSnapshotPath) +
         " ] && echo yes; true";
  return cmd;
}

Result<NodeSnapshot> ParseSnapshot(std::string_view text) {
  std::map<std::string, std::string> sections = Sections(text);
  NodeSnapshot s;
  SPARK_ASSIGN_OR_RETURN(nlohmann::json addr, ParseJsonSection(sections, "addr"));
  SPARK_ASSIGN_OR_RETURN(nlohmann::json route, ParseJsonSection(sections, "route"));
  for (const auto& j : addr) s.netdevs.push_back(ParseNetdev(j));
  for (const auto& j : route) {
    if (auto r = ParseRoute(j)) s.routes.push_back(*r);
  }
  s.addr_json = sections["addr"];
  s.route_json = sections["route"];
  s.sysctl_text = sections["sysctl"];
  for (const std::string& line : Split(s.sysctl_text, '\n', true)) {
    size_t eq = line.find(" = ");
    if (eq != std::string::npos) s.sysctls[line.substr(0, eq)] = line.substr(eq + 3);
  }
  std::vector<std::string> ssh = Split(Trim(sections["ssh"]), ' ', true);
  if (ssh.size() >= 3) s.ssh_server_address = ssh[2];
  std::vector<std::string> key = Split(sections["wgkey"], '\n', true);
  if (key.size() == 2) {
    s.wg_private_key = std::string(Trim(key[0]));
    s.wg_public_key = std::string(Trim(key[1]));
  }
  for (const std::string& line : Split(sections["files"], '\n', true)) {
    // "600 <sha256>  <path>"
    std::vector<std::string> parts = Split(line, ' ', true);
    if (parts.size() < 3) continue;
    FileInfo info{parts[1], static_cast<int>(std::strtol(parts[0].c_str(), nullptr, 8))};
    s.files[parts[2]] = info;
  }
  for (const std::string& line : Split(sections["gids"], '\n', true)) {
    // "rocep1s0f0 3 0000:0000:0000:0000:0000:ffff:c612:0001 RoCE v2"
    std::vector<std::string> parts = Split(line, ' ', true);
    if (parts.size() < 4) continue;
    char* end = nullptr;
    const long index = std::strtol(parts[1].c_str(), &end, 10);
    if (end == parts[1].c_str() || *end != '\0') continue;
    std::string type = parts[3];
    for (size_t k = 4; k < parts.size(); ++k) type += " " + parts[k];
    if (s.rdma.empty() || s.rdma.back().name != parts[0]) {
      s.rdma.emplace_back();
      s.rdma.back().name = parts[0];
    }
    s.rdma.back().gids.push_back({static_cast<int>(index), parts[2], type, ""});
  }
  s.has_saved_snapshot = Trim(sections["saved"]) == "yes";
  return s;
}

std::string SavedSnapshotText(const NodeSnapshot& s) {
  std::string m(kMarker);
  return m + "addr\n" + s.addr_json + m + "route\n" + s.route_json + m + "sysctl\n" +
         s.sysctl_text;
}

netplan::NodeState ToNodeState(const NodeSnapshot& s, const std::set<std::string>& netdevs) {
  netplan::NodeState state;
  for (const NetdevInfo& n : s.netdevs) {
    if (netdevs.count(n.name)) state.links.push_back({n.name, n.mtu, n.up, n.ipv4});
  }
  for (const netplan::RouteState& r : s.routes) {
    if (netdevs.count(r.dev)) state.routes.push_back(r);
  }
  state.sysctls = s.sysctls;
  return state;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

}  // namespace spark::fabric
