#include "sparkctl/sim/network.h"

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "base/strings.h"

namespace spark::sim {
namespace {

constexpr char kNetnsDir[] = "/run/netns";

std::string Mac(int slot, int rank, int a, int b) {
  return fmt::format("02:5c:{:02x}:{:02x}:{:02x}:{:02x}", slot, rank, a, b);
}

bool IsMountPoint(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = Split(line, ' ');
    if (f.size() > 4 && f[4] == path) return true;
  }
  return false;
}

bool HostLinkExists(const std::string& name) {
  return std::filesystem::exists("/sys/class/net/" + name);
}

// Netns deletion tears veths down asynchronously; wait until the host ends are gone.
void WaitHostLinksGone(const ClusterState& cluster) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const NodeState& node : cluster.nodes) {
    while (HostLinkExists(node.host_veth) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status RemoveNetnsMount() {
  for (int i = 0; i < 4 && IsMountPoint(kNetnsDir); ++i)
    if (umount2(kNetnsDir, MNT_DETACH) != 0) return ErrnoError(errno, "umount /run/netns");
  if (rmdir(kNetnsDir) != 0 && errno != ENOENT) return ErrnoError(errno, "rmdir /run/netns");
  return Status::Ok();
}

}  // namespace

ClusterState PlanCluster(const std::string& name, Topology topology, int nodes, int slot) {
  ClusterState c;
  c.name = name;
  c.topology = topology;
  c.slot = slot;
  c.default_memlock = HostMemlockCeiling();
  c.bridge = "sim" + std::to_string(slot) + "-mgmt";
  c.wires_netns = "sparksim-" + name + "-wires";
  for (int r = 0; r < nodes; ++r) {
    NodeState n;
    n.name = NodeName(r);
    n.rank = r;
    n.netns = "sparksim-" + name + "-" + n.name;
    n.mgmt_address = "198.19." + std::to_string(slot) + "." + std::to_string(10 + r);
    n.host_veth = "sim" + std::to_string(slot) + "-n" + std::to_string(r);
    n.facts.memlock = c.default_memlock;
    c.nodes.push_back(n);
  }
  return c;
}

std::vector<std::string> HostBatch(const ClusterState& c) {
  std::vector<std::string> lines = {
      "link add name " + c.bridge + " type bridge",
      "addr add " + c.HostAddress() + "/24 dev " + c.bridge,
      "link set dev " + c.bridge + " up",
  };
  for (const NodeState& n : c.nodes) {
    lines.push_back(fmt::format("link add name {} address {} netns {} type veth peer name {}",
                                kMgmtNetdev, Mac(c.slot, n.rank, 15, 15), n.netns, n.host_veth));
    lines.push_back("link set dev " + n.host_veth + " master " + c.bridge + " up");
    for (int p = 0; p < kPorts; ++p)
      for (int t = 0; t < kTwins; ++t)
        lines.push_back(fmt::format(
            // The wire end carries jumbo frames like a DAC cable or a RoCE switch port; the
            // node's netdev starts at 1500 like a fresh NIC until `net apply` raises it.
            "link add name {} address {} netns {} type veth peer name {} netns {} mtu 9216",
            FabricNetdev(p, t), Mac(c.slot, n.rank, p, t), n.netns, WireEndName(n.rank, p, t),
            c.wires_netns));
  }
  return lines;
}

std::vector<std::string> WiresBatch(const ClusterState& c) {
  std::vector<std::string> lines;
  for (const std::string& bridge : PlanBridges(c.topology, c.nodes.size())) {
    // Forward LLDP like a passive cable would; no snooping, no STP delay.
    lines.push_back("link add name " + bridge +
                    " mtu 9216 type bridge group_fwd_mask 0x4000 mcast_snooping 0 stp_state 0");
    lines.push_back("link set dev " + bridge + " up");
  }
  Wiring wiring = ComputeWiring(c.topology, c.nodes.size(), c.fabric);
  for (const std::string& line : WiringDiff({}, wiring)) lines.push_back(line);
  return lines;
}

std::vector<std::string> NodeBatch(const ClusterState& c, const NodeState& n) {
  std::vector<std::string> lines = {
      "link set dev lo up",
      fmt::format("addr add {}/24 dev {}", n.mgmt_address, kMgmtNetdev),
      fmt::format("link set dev {} up", kMgmtNetdev),
  };
  for (int p = 0; p < kPorts; ++p)
    for (int t = 0; t < kTwins; ++t) lines.push_back(fmt::format("link set dev {} up", FabricNetdev(p, t)));
  (void)c;
  return lines;
}

Status RunIpBatch(Runner& runner, const std::string& netns, const std::vector<std::string>& lines) {
  if (lines.empty()) return Status::Ok();
  std::vector<std::string> argv = {"ip"};
  if (!netns.empty()) argv.insert(argv.end(), {"-n", netns});
  argv.insert(argv.end(), {"-batch", "-"});
  Status s = RunOk(runner, argv, Join(lines, "\n") + "\n");
  return s.ok() ? s : s.WithContext(netns.empty() ? "host network" : "netns " + netns);
}

Status CreateNetwork(Runner& runner, ClusterState& c) {
  c.made_netns_mount = !IsMountPoint(kNetnsDir);
  std::vector<std::string> add = {"netns add " + c.wires_netns};
  for (const NodeState& n : c.nodes) add.push_back("netns add " + n.netns);
  SPARK_RETURN_IF_ERROR(RunIpBatch(runner, "", add));
  // The wire ends must stay silent: no IPv6 link-local, router solicitations or DAD on cables.
  SPARK_RETURN_IF_ERROR(RunOk(runner, {"ip", "netns", "exec", c.wires_netns, "sysctl", "-qw",
                                       "net.ipv6.conf.all.disable_ipv6=1",
                                       "net.ipv6.conf.default.disable_ipv6=1"}));
  SPARK_RETURN_IF_ERROR(RunIpBatch(runner, "", HostBatch(c)));
  return RunIpBatch(runner, c.wires_netns, WiresBatch(c));
}

Status Rewire(Runner& runner, const ClusterState& c, const FabricFaults& before) {
  int n = c.nodes.size();
  return RunIpBatch(runner, c.wires_netns,
                    WiringDiff(ComputeWiring(c.topology, n, before),
                               ComputeWiring(c.topology, n, c.fabric)));
}

std::vector<std::string> ListNetns(Runner& runner) {
  std::vector<std::string> names;
  Result<std::string> out = RunOutput(runner, {"ip", "netns", "list"});
  if (!out.ok()) return names;
  for (const std::string& line : Split(*out, '\n', true)) names.push_back(Split(line, ' ')[0]);
  return names;
}

Status DeleteNetwork(Runner& runner, const ClusterState& c, bool netns_mount_ours) {
  std::vector<std::string> existing = ListNetns(runner);
  auto exists = [&](const std::string& ns) {
    return std::find(existing.begin(), existing.end(), ns) != existing.end();
  };
  std::vector<std::string> del;
  for (const NodeState& n : c.nodes)
    if (exists(n.netns)) del.push_back("netns del " + n.netns);
  if (exists(c.wires_netns)) del.push_back("netns del " + c.wires_netns);
  if (HostLinkExists(c.bridge)) del.push_back("link del dev " + c.bridge);
  SPARK_RETURN_IF_ERROR(RunIpBatch(runner, "", del));
  WaitHostLinksGone(c);
  // A process still inside a deleted namespace (a node-side timer that outlived the kill loop)
  // keeps that namespace, and with it the veth pair, alive. Delete our host ends so the slot can
  // be reused at once; the pair goes with them.
  std::vector<std::string> stale;
  for (const NodeState& n : c.nodes)
    if (HostLinkExists(n.host_veth)) stale.push_back("link del dev " + n.host_veth);
  if (!stale.empty()) SPARK_RETURN_IF_ERROR(RunIpBatch(runner, "", stale));
  if (netns_mount_ours && ListNetns(runner).empty()) return RemoveNetnsMount();
  return Status::Ok();
}

}  // namespace spark::sim
