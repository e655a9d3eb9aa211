#include "sparkctl/host/facts_gather.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <array>
#include <map>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "base/version.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/bundle/platform.h"
#include "sparkctl/ssh/transport.h"

namespace spark::host {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string ReadLine(const std::string& path) { return std::string(Trim(ReadText(path))); }

Result<std::string> RunShell(const std::string& command) {
  std::string full = "timeout 10 " + command + " 2>/dev/null";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return ErrnoError(errno, command);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int rc = pclose(pipe);
  if (rc != 0) return AbortedError("`" + command + "` exited with status " + std::to_string(rc));
  return out;
}

std::string KeyValue(const std::string& text, const std::string& key) {
  for (const std::string& line : Split(text, '\n')) {
    if (!StartsWith(line, key + "=")) continue;
    std::string value(Trim(line.substr(key.size() + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return "";
}

std::string DgxRelease(const std::string& text) {
  for (const char* key : {"DGX_SWBUILD_VERSION", "DGX_OTA_VERSION", "DGX_SWBUILD_DATE"}) {
    std::string v = KeyValue(text, key);
    if (!v.empty()) return v;
  }
  return std::string(Trim(Split(text, '\n')[0]));
}

RdmaDeviceFacts ReadRdmaDevice(const fs::path& dev) {
  RdmaDeviceFacts d;
  d.name = dev.filename().string();
  fs::path port = dev / "ports" / "1";
  std::string state = ReadLine((port / "state").string());  // "4: ACTIVE"
  size_t colon = state.find(':');
  d.state = colon == std::string::npos ? state : std::string(Trim(state.substr(colon + 1)));
  d.active_mtu = static_cast<int>(ParseInt(Split(ReadLine((port / "active_mtu").string()), ' ')[0]).value_or(0));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dev / "device" / "net", ec)) {
    d.netdev = e.path().filename().string();
  }
  for (int i = 0; i < 16; ++i) {
    std::string n = std::to_string(i);
    std::string gid = ReadLine((port / "gids" / n).string());
    if (gid.empty() || gid == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    std::string type = ReadLine((port / "gid_attrs" / "types" / n).string());
    std::string ndev = ReadLine((port / "gid_attrs" / "ndevs" / n).string());
    d.gids.push_back({i, gid, type, ndev});
    if (d.netdev.empty()) d.netdev = ndev;
  }
  return d;
}

void ReadNetdevs(const GatherOptions& o, NodeFacts* f) {
  std::map<std::string, std::vector<std::string>> addrs;
  if (auto out = o.run("ip -j -4 addr show"); out.ok()) {
    try {
      for (const auto& link : nlohmann::json::parse(*out)) {
        for (const auto& a : link.value("addr_info", nlohmann::json::array())) {
          addrs[link.value("ifname", "")].push_back(a.value("local", "") + "/" +
                                                     std::to_string(a.value("prefixlen", 0)));
        }
      }
    } catch (const nlohmann::json::exception&) {
      // No addresses known; operstate and MTU still come from sysfs.
    }
  }
  for (const auto& port : netplan::kPortTwins) {
    for (const auto& twin : port) {
      NetdevFacts n;
      n.name = twin.netdev;
      fs::path dir = fs::path(o.root) / "sys/class/net" / n.name;
      n.present = fs::exists(dir);
      if (n.present) {
        n.operstate = ReadLine((dir / "operstate").string());
        n.mtu = static_cast<int>(ParseInt(ReadLine((dir / "mtu").string())).value_or(0));
        n.ipv4 = addrs[n.name];
      }
      f->netdevs.push_back(std::move(n));
    }
  }
}

int64_t DiskFree(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();  // the model dir may not exist yet
  struct statvfs st;
  if (statvfs(p.empty() ? "/" : p.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

}  // namespace

int64_t MeminfoValueKib(const std::string& meminfo, const std::string& key) {
  for (const std::string& line : Split(meminfo, '\n')) {
    if (!StartsWith(line, key + ":")) continue;
    std::vector<std::string> parts = Split(std::string(Trim(line.substr(key.size() + 1))), ' ', true);
    if (!parts.empty()) return ParseInt(parts[0]).value_or(-1);
  }
  return -1;
}

std::string MemlockFromLimits(const std::string& limits) {
  for (const std::string& line : Split(limits, '\n')) {
    if (!StartsWith(line, "Max locked memory")) continue;
    std::vector<std::string> parts = Split(line.substr(17), ' ', true);
    if (parts.empty()) return "";
    if (parts[0] == "unlimited") return "unlimited";
    auto bytes = ParseInt(parts[0]);
    return bytes ? std::to_string(*bytes / 1024) : "";
  }
  return "";
}

std::string ForwardPolicyFromIptables(const std::string& text) {
  for (const std::string& line : Split(text, '\n')) {
    std::string_view l = Trim(line);
    if (l == "-P FORWARD DROP") return "DROP";
    if (l == "-P FORWARD ACCEPT") return "ACCEPT";
  }
  return "";
}

GpuFacts GpuFromNvidiaSmi(const std::string& csv) {
  GpuFacts g;
  std::vector<std::string> fields = Split(std::string(Trim(Split(csv, '\n')[0])), ',');
  if (fields.size() < 5) {
    g.error = "unexpected nvidia-smi output: " + csv.substr(0, 120);
    return g;
  }
  for (auto& f : fields) f = std::string(Trim(f));
  g.present = !fields[0].empty();
  g.name = fields[0];
  g.driver = fields[1];
  g.sm_clock_mhz = static_cast<int>(ParseInt(fields[2]).value_or(0));
  g.max_sm_clock_mhz = static_cast<int>(ParseInt(fields[3]).value_or(0));
  g.memory_mib = ParseInt(fields[4]).value_or(0);  // "[N/A]" on GB10: unified memory
  return g;
}

NodeFacts GatherFacts(const GatherOptions& options) {
  GatherOptions o = options;
  if (!o.run) o.run = RunShell;
  auto at = [&](const char* rel) { return (fs::path(o.root) / rel).string(); };
  NodeFacts f;
  f.hostname = ReadLine(at("proc/sys/kernel/hostname"));
  f.machine_id = ReadLine(at("etc/machine-id"));
  f.kernel = ReadLine(at("proc/sys/kernel/osrelease"));
  f.os = KeyValue(ReadText(at("etc/os-release")), "PRETTY_NAME");
  f.dgx_release = DgxRelease(ReadText(at("etc/dgx-release")));
  if (auto platform = o.run("sh -c " + ssh::ShellQuote(bundle::PlatformProbeScript()));
      platform.ok()) {
    auto parsed = bundle::ParsePlatform(f.hostname, *platform);
    if (parsed.ok()) f.platform = std::move(*parsed);
  }
  std::string meminfo = ReadText(at("proc/meminfo"));
  f.mem_total_kib = MeminfoValueKib(meminfo, "MemTotal");
  f.mem_available_kib = MeminfoValueKib(meminfo, "MemAvailable");
  f.cma_total_kib = MeminfoValueKib(meminfo, "CmaTotal");
  f.cma_free_kib = MeminfoValueKib(meminfo, "CmaFree");
  f.memlock = MemlockFromLimits(ReadText(at("proc/self/limits")));
  auto smi = o.run(
      "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total "
      "--format=csv,noheader,nounits");
  if (smi.ok()) {
    f.gpu = GpuFromNvidiaSmi(*smi);
  } else {
    f.gpu.error = "nvidia-smi: " + smi.status().message();
  }
  std::error_code ec;
  std::vector<fs::path> devices;
  for (const auto& e : fs::directory_iterator(at("sys/class/infiniband"), ec)) devices.push_back(e.path());
  std::sort(devices.begin(), devices.end());
  for (const auto& dev : devices) f.rdma.push_back(ReadRdmaDevice(dev));
  ReadNetdevs(o, &f);
  f.disk_path = o.disk_path;
  std::string disk = o.root == "/" ? o.disk_path : at(o.disk_path.c_str() + (o.disk_path[0] == '/'));
  f.disk_free_bytes = DiskFree(disk);
  f.disk_path_exists = fs::exists(disk, ec);
  std::string nccl_conf = ReadText(at("etc/nccl.conf"));
  f.nccl_conf_present = fs::exists(at("etc/nccl.conf"));
  f.nccl_conf = nccl_conf.substr(0, 400);
  if (auto ipt = o.run("iptables -S FORWARD"); ipt.ok()) f.forward_policy = ForwardPolicyFromIptables(*ipt);
  f.sparkctl_version = kVersion;
  return f;
}

}  // namespace spark::host
