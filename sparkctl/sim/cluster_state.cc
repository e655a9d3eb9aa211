#include "sparkctl/sim/cluster_state.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace spark::sim {
namespace {

using nlohmann::json;

json PortsToJson(const std::set<PortRef>& ports) {
  json out = json::array();
  for (const PortRef& p : ports) out.push_back({{"rank", p.rank}, {"port", p.port}});
  return out;
}

std::set<PortRef> PortsFromJson(const json& in) {
  std::set<PortRef> out;
  for (const json& p : in) out.insert({p.at("rank").get<int>(), p.at("port").get<int>()});
  return out;
}

json NodeToJson(const NodeState& n) {
  return {{"name", n.name},
          {"rank", n.rank},
          {"netns", n.netns},
          {"mgmt_address", n.mgmt_address},
          {"host_veth", n.host_veth},
          {"holder_pid", n.holder_pid},
          {"default_machine_id", n.default_machine_id},
          {"facts",
           {{"kernel_release", n.facts.kernel_release},
            {"cma_kib", n.facts.cma_kib},
            {"memlock", n.facts.memlock},
            {"machine_id", n.facts.machine_id},
            {"sshd_running", n.facts.sshd_running},
            {"forward_drop", n.facts.forward_drop},
            {"mem_available_kib", n.facts.mem_available_kib},
            {"machine", n.facts.machine},
            {"glibc", n.facts.glibc}}}};
}

NodeState NodeFromJson(const json& j) {
  NodeState n;
  n.name = j.at("name");
  n.rank = j.at("rank");
  n.netns = j.at("netns");
  n.mgmt_address = j.at("mgmt_address");
  n.host_veth = j.at("host_veth");
  n.holder_pid = j.at("holder_pid");
  n.default_machine_id = j.at("default_machine_id");
  const json& f = j.at("facts");
  n.facts = {f.at("kernel_release"), f.at("cma_kib"),      f.at("memlock"),
             f.at("machine_id"),     f.at("sshd_running"), f.at("forward_drop"),
             f.value("mem_available_kib", kDefaultMemAvailableKib),
             f.value("machine", ""),  f.value("glibc", "")};
  return n;
}

json StateToJson(const ClusterState& s) {
  json nodes = json::array();
  for (const NodeState& n : s.nodes) nodes.push_back(NodeToJson(n));
  return {{"schema", kStateSchema},
          {"name", s.name},
          {"topology", TopologyName(s.topology)},
          {"slot", s.slot},
          {"bridge", s.bridge},
          {"wires_netns", s.wires_netns},
          {"made_netns_mount", s.made_netns_mount},
          {"ready", s.ready},
          {"default_memlock", s.default_memlock},
          {"bare_libs", s.bare_libs},
          {"nodes", nodes},
          {"fabric",
           {{"unplugged", PortsToJson(s.fabric.unplugged)},
            {"swapped", PortsToJson(s.fabric.swapped)},
            {"miscabled", s.fabric.miscabled}}}};
}

Result<ClusterState> StateFromJson(const json& j) {
  ClusterState s;
  s.name = j.at("name");
  SPARK_ASSIGN_OR_RETURN(s.topology, ParseTopology(j.at("topology").get<std::string>()));
  s.slot = j.at("slot");
  s.bridge = j.at("bridge");
  s.wires_netns = j.at("wires_netns");
  s.made_netns_mount = j.at("made_netns_mount");
  s.ready = j.at("ready");
  s.default_memlock = j.value("default_memlock", std::string(kDefaultMemlock));
  s.bare_libs = j.value("bare_libs", false);
  for (const json& n : j.at("nodes")) s.nodes.push_back(NodeFromJson(n));
  const json& f = j.at("fabric");
  s.fabric.unplugged = PortsFromJson(f.at("unplugged"));
  s.fabric.swapped = PortsFromJson(f.at("swapped"));
  s.fabric.miscabled = f.at("miscabled");
  return s;
}

}  // namespace

std::string ClusterState::HostAddress() const { return "198.19." + std::to_string(slot) + ".1"; }

Result<NodeState*> ClusterState::FindNode(const std::string& node) {
  std::vector<std::string> names;
  for (NodeState& n : nodes) {
    if (n.name == node || n.netns == node || std::to_string(n.rank) == node) return &n;
    names.push_back(n.name);
  }
  return NotFoundError("cluster '" + name + "' has no node '" + node + "'" +
                       DidYouMean(node, names) + "; nodes: " + Join(names, ", ") +
                       " (or their ranks 0.." + std::to_string(nodes.size() - 1) + ")");
}

std::string HostMemlockCeiling() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_max == RLIM_INFINITY) return "unlimited";
  std::ifstream status("/proc/self/status");
  std::string line;
  constexpr uint64_t kCapSysResource = 1ull << 24;
  while (std::getline(status, line))
    if (line.starts_with("CapEff:") && (std::stoull(line.substr(7), nullptr, 16) & kCapSysResource))
      return "unlimited";
  return std::to_string(limit.rlim_max / 1024);
}

Status ValidateClusterName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 32 && name[0] != '-';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgumentError("cluster name '" + name +
                              "' must be 1-32 characters of a-z, 0-9 and '-' (e.g. --name demo)");
}

Status WriteFileAtomic(const std::string& path, const std::string& content, int mode) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError(errno, tmp);
  ssize_t n = write(fd, content.data(), content.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(content.size())) return ErrnoError(err, "write " + tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError(errno, "rename to " + path);
  return Status::Ok();
}

Status WriteFileInPlace(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, path);
  ssize_t n = write(fd, content.data(), content.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(content.size())) return ErrnoError(err, "write " + path);
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(errno, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status SaveState(const std::string& root, const ClusterState& state) {
  return WriteFileAtomic(state.Dir(root) + "/state.json", StateToJson(state).dump(2) + "\n");
}

Result<ClusterState> LoadState(const std::string& root, const std::string& name) {
  std::string path = root + "/" + name + "/state.json";
  if (!std::filesystem::exists(path))
    return NotFoundError("no simulated cluster '" + name + "' (" + path +
                         " is missing); see `sparkctl sim status` or create it with "
                         "`sparkctl sim create --name " + name + "`");
  SPARK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  try {
    return StateFromJson(json::parse(text));
  } catch (const json::exception& e) {
    return DataLossError(path + ": " + e.what() + "; remove the cluster with `sparkctl sim " +
                         "destroy --name " + name + "` after cleaning up by hand");
  }
}

std::vector<std::string> ListClusters(const std::string& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec))
    if (std::filesystem::exists(entry.path() / "state.json")) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace spark::sim
