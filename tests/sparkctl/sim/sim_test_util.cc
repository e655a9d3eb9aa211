#include "tests/sparkctl/sim/sim_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/strings.h"

namespace spark::sim::testing {
namespace {

namespace fs = std::filesystem;

std::set<std::string> Lines(const std::string& command, int field) {
  std::set<std::string> out;
  for (const std::string& line : Split(Sh(command).out, '\n', true)) {
    std::vector<std::string> f = Split(line, ' ', true);
    if (static_cast<int>(f.size()) > field) out.insert(f[field]);
  }
  return out;
}

std::string NetnsOf(const fs::path& proc) {
  std::error_code ec;
  return fs::read_symlink(proc / "ns/net", ec).string();
}

std::string Describe(const std::set<std::string>& extra) { return Join({extra.begin(), extra.end()}, ","); }

template <typename T>
std::set<T> Minus(const std::set<T>& a, const std::set<T>& b) {
  std::set<T> out;
  for (const T& x : a)
    if (!b.contains(x)) out.insert(x);
  return out;
}

}  // namespace

bool HaveRoot() { return geteuid() == 0; }

CommandResult Sh(const std::string& command) {
  ProcessRunner runner;
  Result<CommandResult> r = runner.Run({"/bin/sh", "-c", command});
  return r.ok() ? *r : CommandResult{127, "", r.status().ToString()};
}

HostSnapshot TakeSnapshot() {
  HostSnapshot s;
  s.netns = Lines("ip netns list", 0);
  for (std::string link : Lines("ip -o link show", 1)) s.links.insert(link.substr(0, link.find('@')));
  s.mounts = Lines("cat /proc/self/mountinfo", 4);
  const std::string self = NetnsOf("/proc/self");
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::optional<int64_t> pid = ParseInt(entry.path().filename().string());
    if (!pid) continue;
    std::string ns = NetnsOf(entry.path());
    if (!ns.empty() && ns != self) s.foreign_pids.insert(*pid);
  }
  return s;
}

// Drops what belongs to other simulated clusters: their namespaces, netns mounts, links and
// the processes inside their namespaces.
HostSnapshot OursOnly(HostSnapshot s, const std::string& cluster, int slot) {
  const std::string ours = "sparksim-" + cluster + "-", link = "sim" + std::to_string(slot) + "-";
  bool others = std::erase_if(s.netns, [&](const std::string& ns) {
                  return ns.starts_with("sparksim-") && !ns.starts_with(ours);
                }) > 0;
  std::erase_if(s.links, [&](const std::string& l) {
    return l.starts_with("sim") && l.find("-") != std::string::npos && !l.starts_with(link);
  });
  std::erase_if(s.mounts, [&](const std::string& m) {
    return (m.starts_with("/run/netns/sparksim-") && !m.starts_with("/run/netns/" + ours)) ||
           (others && m == "/run/netns");
  });
  std::set<std::string> named;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/run/netns", ec))
    if (!entry.path().filename().string().starts_with(ours)) {
      struct stat st{};
      if (stat(entry.path().c_str(), &st) == 0) named.insert("net:[" + std::to_string(st.st_ino) + "]");
    }
  std::erase_if(s.foreign_pids, [&](int pid) {
    return named.contains(NetnsOf("/proc/" + std::to_string(pid)));
  });
  return s;
}

std::string DiffAfterDestroy(const HostSnapshot& raw_before, const std::string& cluster, int slot) {
  std::string diff;
  const HostSnapshot before = OursOnly(raw_before, cluster, slot);
  for (int attempt = 0; attempt < 100; ++attempt) {
    HostSnapshot after = OursOnly(TakeSnapshot(), cluster, slot);
    diff.clear();
    if (after.netns != before.netns) diff += " netns:" + Describe(Minus(after.netns, before.netns));
    if (after.links != before.links) diff += " links:" + Describe(Minus(after.links, before.links));
    if (after.mounts != before.mounts)
      diff += " mounts:" + Describe(Minus(after.mounts, before.mounts)) + "/-" +
              Describe(Minus(before.mounts, after.mounts));
    std::set<int> extra = Minus(after.foreign_pids, before.foreign_pids);
    if (!extra.empty()) diff += " processes:" + std::to_string(extra.size());
    if (diff.empty()) return diff;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return diff;
}

CommandResult Ssh(const SeedFiles& seeds, const NodeState& node, const std::string& command) {
  ProcessRunner runner;
  Result<CommandResult> r = runner.Run(
      {"ssh", "-i", seeds.identity, "-o", "StrictHostKeyChecking=yes", "-o",
       "UserKnownHostsFile=" + seeds.known_hosts, "-o", "GlobalKnownHostsFile=/dev/null", "-o",
       "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
       "root@" + node.mgmt_address, command});
  return r.ok() ? *r : CommandResult{255, "", r.status().ToString()};
}

bool Ping(const std::string& netns, const std::string& dev, const std::string& address) {
  return Sh("ip -n " + netns + " neigh flush dev " + dev + "; ip netns exec " + netns + " ping -n -q -c 1 -W 1 -I " + dev + " " + address +
            " >/dev/null 2>&1")
             .exit_code == 0;
}

std::string PeerMac(const std::string& netns, const std::string& dev, const std::string& address) {
  Ping(netns, dev, address);
  std::vector<std::string> f =
      Split(Sh("ip -n " + netns + " neigh show to " + address + " dev " + dev).out, ' ', true);
  for (size_t i = 0; i + 1 < f.size(); ++i)
    if (f[i] == "lladdr") return f[i + 1];
  return "";
}

}  // namespace spark::sim::testing
