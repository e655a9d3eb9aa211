#include "sparkctl/host/checks.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/strings.h"

namespace spark::host {
namespace {

using netplan::kPortTwins;

struct Ctx {
  const PreflightInput& in;
  std::vector<CheckResult>* out;
  void Add(std::string id, const std::string& node, Verdict v, std::string seen, std::string hint = "") {
    out->push_back({std::move(id), node, v, std::move(seen), v == Verdict::kOk ? "" : std::move(hint)});
  }
};

// Ports whose links must be up: those cabled in the inventory; both when cabling is unknown
// (then a down link is only a warning).
std::vector<int> UsedPorts(const netplan::ClusterSpec* cluster, const std::string& node, bool* known) {
  *known = false;
  const netplan::NodeSpec* spec = cluster ? cluster->FindNode(node) : nullptr;
  if (!spec || spec->ports.empty()) return {0, 1};
  *known = true;
  std::vector<int> ports;
  for (const auto& p : spec->ports) {
    if (p.peer) ports.push_back(p.name == "p1" ? 1 : 0);
  }
  return ports;
}

void CheckKernel(Ctx& c, const std::string& node, const NodeFacts& f) {
  const profile::HostSpec* h = c.in.profile ? &c.in.profile->host : nullptr;
  if (h) {
    for (const auto& d : h->kernel_deny) {
      if (d.release == f.kernel) {
        c.Add("KERNEL.ALLOWED", node, Verdict::kFail, f.kernel, d.reason + ". Fix: " + d.fix);
        return;
      }
    }
    if (!h->kernel_allow.empty() &&
        std::find(h->kernel_allow.begin(), h->kernel_allow.end(), f.kernel) == h->kernel_allow.end()) {
      c.Add("KERNEL.ALLOWED", node, Verdict::kFail, f.kernel,
            "not in the profile's allow list (" + Join(h->kernel_allow, ", ") +
                "); boot one of those and hold it with `sparkctl host pin`");
      return;
    }
  }
  c.Add("KERNEL.ALLOWED", node, Verdict::kOk, f.kernel);
}

void CheckMemory(Ctx& c, const std::string& node, const NodeFacts& f) {
  int min_cma_mib = c.in.profile ? c.in.profile->host.min_cma_mib : 64;
  if (f.cma_total_kib < 0) {
    c.Add("CMA.NONZERO", node, Verdict::kFail, "no CmaTotal in /proc/meminfo",
          "the kernel was built without CMA; boot a DGX OS kernel (6.17.0-1032-nvidia)");
  } else if (f.cma_total_kib < int64_t{min_cma_mib} * 1024) {
    c.Add("CMA.NONZERO", node, Verdict::kFail, "CmaTotal " + std::to_string(f.cma_total_kib) + " kB",
          "ibv_reg_mr will fail with ENOMEM at NCCL init (seen on 7.0.0-1019-nvidia): boot "
          "6.17.0-1032-nvidia and hold it (`sparkctl host pin`), or add kho=off to the kernel "
          "command line");
  } else {
    c.Add("CMA.NONZERO", node, Verdict::kOk, "CmaTotal " + std::to_string(f.cma_total_kib) + " kB");
  }
  std::string want = c.in.profile ? c.in.profile->host.memlock : "unlimited";
  bool ok = f.memlock == "unlimited" ||
            (want != "unlimited" && ParseInt(f.memlock).value_or(0) >= ParseInt(want).value_or(0));
  c.Add("MEMLOCK.UNLIMITED", node, ok ? Verdict::kOk : Verdict::kFail,
        f.memlock.empty() ? "unknown" : (f.memlock == "unlimited" ? f.memlock : f.memlock + " KiB"),
        "RDMA memory registration fails with ENOMEM under a low memlock limit: set `* - memlock "
        "unlimited` in /etc/security/limits.d/ (sparkctl host pin does this) and log in again");
  double need_gib = c.in.profile ? c.in.profile->host.min_free_memory_gib : 4;
  double model_gib = 0;
  if (c.in.profile && c.in.profile->model.resident_gib_per_node > 0) {
    model_gib = c.in.profile->model.resident_gib_per_node;
  } else if (c.in.profile && c.in.profile->topology.nodes > 0) {
    model_gib = c.in.profile->model.size_gib / c.in.profile->topology.nodes;
  }
  double available_gib = f.mem_available_kib / 1048576.0;
  double left = available_gib - model_gib;
  char seen[160];
  std::snprintf(seen, sizeof(seen), "%.1f GiB available, %.1f GiB model share, %.1f GiB left",
                available_gib, model_gib, left);
  c.Add("MEMORY.HEADROOM", node, left >= need_gib ? Verdict::kOk : Verdict::kFail, seen,
        "less than the profile's min_free_memory_gib (" + FormatNumber(need_gib) +
            ") would be left: exhausting unified memory wedges the host. Stop other workloads "
            "or use more nodes");
}

void CheckGpu(Ctx& c, const std::string& node, const NodeFacts& f) {
  bool need_gpu = !c.in.profile || c.in.profile->engine.backend != "cpu";
  if (!f.gpu.present) {
    c.Add("GPU.PRESENT", node, need_gpu ? Verdict::kFail : Verdict::kWarn,
          f.gpu.error.empty() ? "no GPU" : f.gpu.error,
          "no GPU found by nvidia-smi: check the driver (nvidia-smi) or use engine.backend: cpu");
    return;
  }
  c.Add("GPU.PRESENT", node, Verdict::kOk, f.gpu.name + ", driver " + f.gpu.driver);
  std::string clocks = std::to_string(f.gpu.sm_clock_mhz) + " / " +
                       std::to_string(f.gpu.max_sm_clock_mhz) + " MHz (SM now / max)";
  c.Add("GPU.CLOCKS", node, f.gpu.max_sm_clock_mhz >= 2000 ? Verdict::kOk : Verdict::kWarn, clocks,
        "the SM clock ceiling is latched low (a known GB10 state): reboot the node before "
        "benchmarking");
}

void CheckDisk(Ctx& c, const std::string& node, const NodeFacts& f) {
  double need = c.in.profile ? c.in.profile->model.size_gib : 0;
  double free_gib = f.disk_free_bytes / 1073741824.0;
  char seen[128];
  std::snprintf(seen, sizeof(seen), "%.1f GiB free at %s", free_gib, f.disk_path.c_str());
  if (f.disk_free_bytes < 0) {
    c.Add("DISK.FREE", node, Verdict::kWarn, "unknown at " + f.disk_path, "could not stat the model path");
  } else if (free_gib >= need * 1.02 || f.disk_path_exists) {
    // An existing copy is judged by `sparkctl weights verify`, not by free space.
    c.Add("DISK.FREE", node, Verdict::kOk, seen);
  } else {
    c.Add("DISK.FREE", node, Verdict::kFail, seen,
          "the model needs " + std::to_string(static_cast<int>(need)) +
              " GiB on every node (a ring has no shared storage): free space or move model.path");
  }
}

void CheckLeftovers(Ctx& c, const std::string& node, const NodeFacts& f) {
  c.Add("NCCL_CONF.ABSENT", node, f.nccl_conf_present ? Verdict::kFail : Verdict::kOk,
        f.nccl_conf_present ? "/etc/nccl.conf present: " + std::string(Trim(f.nccl_conf.substr(0, 80)))
                            : "absent",
        "/etc/nccl.conf overrides the NCCL settings sparkctl computes per rank (GID index, HCAs): "
        "move it aside (mv /etc/nccl.conf /etc/nccl.conf.bak)");
  bool forwarding = c.in.cluster && c.in.cluster->fabric.kind &&
                    (*c.in.cluster->fabric.kind == netplan::TopologyKind::kRing ||
                     *c.in.cluster->fabric.kind == netplan::TopologyKind::kLine);
  bool drop = f.forward_policy == "DROP";
  c.Add("FIREWALL.FORWARD", node, drop ? (forwarding ? Verdict::kFail : Verdict::kWarn) : Verdict::kOk,
        f.forward_policy.empty() ? "unknown (no iptables)" : "FORWARD policy " + f.forward_policy,
        "the FORWARD chain drops routed packets (Docker sets this), which looks exactly like a dead "
        "cable to non-adjacent ranks: run `iptables -P FORWARD ACCEPT`, or allow the fabric "
        "netdevs in DOCKER-USER");
}

void CheckFabric(Ctx& c, const std::string& node, const NodeFacts& f) {
  bool known = false;
  std::vector<int> ports = UsedPorts(c.in.cluster, node, &known);
  Verdict bad = known ? Verdict::kFail : Verdict::kWarn;
  int mtu = c.in.cluster ? c.in.cluster->fabric.mtu : 9000;
  std::vector<std::string> down, missing, small_mtu, rdma_down, no_gid, gid_seen;
  std::set<int> gid_indexes;
  for (int p : ports) {
    for (const auto& twin : kPortTwins[p]) {
      const NetdevFacts* n = f.FindNetdev(twin.netdev);
      if (!n || !n->present) {
        missing.push_back(twin.netdev);
        continue;
      }
      if (n->operstate != "up") down.push_back(std::string(twin.netdev) + " (" + n->operstate + ")");
      if (!n->ipv4.empty() && n->mtu < mtu) small_mtu.push_back(std::string(twin.netdev) + " mtu " + std::to_string(n->mtu));
      const RdmaDeviceFacts* r = f.FindRdma(twin.rdma_device);
      if (!r || r->state != "ACTIVE") {
        rdma_down.push_back(std::string(twin.rdma_device) + (r ? " " + r->state : " missing"));
      }
      if (r && !n->ipv4.empty()) {
        auto idx = r->RoceV2Ipv4Index();
        if (idx) {
          gid_indexes.insert(*idx);
          gid_seen.push_back(std::string(twin.rdma_device) + "=" + std::to_string(*idx));
        } else {
          no_gid.push_back(twin.rdma_device);
        }
      }
    }
  }
  std::string used = Join([&] {
    std::vector<std::string> v;
    for (int p : ports) v.push_back(netplan::kPortNames[p]);
    return v;
  }(), ",");
  if (!missing.empty()) {
    c.Add("FABRIC.LINK_UP", node, Verdict::kFail, "missing netdevs: " + Join(missing, ", "),
          "the ConnectX-7 functions are not all visible: check the mlx5 driver (ibdev2netdev)");
  } else {
    c.Add("FABRIC.LINK_UP", node, down.empty() ? Verdict::kOk : bad,
          down.empty() ? "ports " + used + " up" : "down: " + Join(down, ", "),
          "check the DAC cable on that port (both twins must link); `sparkctl discover` names the "
          "cable");
  }
  c.Add("RDMA.PORT_ACTIVE", node, rdma_down.empty() ? Verdict::kOk : bad,
        rdma_down.empty() ? "all used RDMA ports ACTIVE" : Join(rdma_down, ", "),
        "an RDMA port is not ACTIVE: the link is down or the device is missing (ibv_devinfo)");
  c.Add("FABRIC.MTU", node, small_mtu.empty() ? Verdict::kOk : Verdict::kFail,
        small_mtu.empty() ? "mtu " + std::to_string(mtu) + " (or not configured yet)" : Join(small_mtu, ", "),
        "fabric netdevs need MTU " + std::to_string(mtu) + " (verbs MTU 4096): run `sparkctl net apply`");
  if (gid_seen.empty() && no_gid.empty()) {
    c.Add("ROCE.GID_V2_IPV4", node, Verdict::kWarn, "no fabric address yet",
          "run `sparkctl net apply`; the RoCE v2 GID appears once the fabric has addresses");
  } else if (!no_gid.empty()) {
    c.Add("ROCE.GID_V2_IPV4", node, Verdict::kFail, "no RoCE v2 IPv4 GID on " + Join(no_gid, ", "),
          "the netdev has an address but no RoCE v2 GID: check the RDMA driver (show_gids)");
  } else {
    c.Add("ROCE.GID_V2_IPV4", node, gid_indexes.size() == 1 ? Verdict::kOk : Verdict::kWarn,
          "index " + Join(gid_seen, ", "),
          "RoCE v2 GID indexes differ between devices: NCCL_IB_GID_INDEX takes one value; sparkctl "
          "uses the one it found, re-run preflight after reboots (the index moves)");
  }
}

void CheckUniqueIds(Ctx& c) {
  std::map<std::string, std::vector<std::string>> by_id;
  for (const auto& n : c.in.nodes) {
    if (n.facts.ok()) by_id[n.facts->machine_id].push_back(n.name);
  }
  for (const auto& n : c.in.nodes) {
    if (!n.facts.ok()) continue;
    const auto& same = by_id[n.facts->machine_id];
    c.Add("MACHINE_ID.UNIQUE", n.name, same.size() == 1 ? Verdict::kOk : Verdict::kFail,
          n.facts->machine_id + (same.size() == 1 ? "" : " (shared by " + Join(same, ", ") + ")"),
          "nodes flashed from one image share /etc/machine-id, which breaks identity: on each "
          "duplicate run `rm /etc/machine-id && systemd-machine-id-setup` and reboot");
  }
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "ok";
    case Verdict::kWarn: return "warn";
    case Verdict::kFail: return "fail";
  }
  return "?";
}

const std::vector<std::string>& AllCheckIds() {
  static const std::vector<std::string> kIds = {
      "SSH.REACHABLE",  "KERNEL.ALLOWED",   "CMA.NONZERO",       "MEMLOCK.UNLIMITED",
      "MEMORY.HEADROOM", "GPU.PRESENT",     "GPU.CLOCKS",        "DISK.FREE",
      "FABRIC.LINK_UP", "RDMA.PORT_ACTIVE", "FABRIC.MTU",        "ROCE.GID_V2_IPV4",
      "FABRIC.CABLING", "MACHINE_ID.UNIQUE", "NCCL_CONF.ABSENT", "FIREWALL.FORWARD"};
  return kIds;
}

std::vector<CheckResult> RunChecks(const PreflightInput& input) {
  std::vector<CheckResult> results;
  Ctx c{input, &results};
  for (const auto& n : input.nodes) {
    if (!n.facts.ok()) {
      c.Add("SSH.REACHABLE", n.name, Verdict::kFail, n.facts.status().message(),
            "check the node is powered, its management address and SSH key (see docs/ssh.md)");
      continue;
    }
    const NodeFacts& f = *n.facts;
    c.Add("SSH.REACHABLE", n.name, Verdict::kOk, f.hostname + ", " + f.os);
    CheckKernel(c, n.name, f);
    CheckMemory(c, n.name, f);
    CheckGpu(c, n.name, f);
    CheckDisk(c, n.name, f);
    CheckFabric(c, n.name, f);
    CheckLeftovers(c, n.name, f);
  }
  CheckUniqueIds(c);
  if (input.cabling) {
    if (input.cabling->empty()) {
      c.Add("FABRIC.CABLING", "", Verdict::kOk, "cabling matches the topology");
    }
    for (const auto& finding : *input.cabling) {
      c.Add("FABRIC.CABLING", finding.node, Verdict::kFail, finding.message,
            "move the cable as described, then run `sparkctl discover` again");
    }
  }
  // Report order: by check ID as listed, then node.
  const auto& ids = AllCheckIds();
  std::stable_sort(results.begin(), results.end(), [&](const CheckResult& a, const CheckResult& b) {
    auto ia = std::find(ids.begin(), ids.end(), a.id) - ids.begin();
    auto ib = std::find(ids.begin(), ids.end(), b.id) - ids.begin();
    return ia < ib;
  });
  return results;
}

bool AnyFailed(const std::vector<CheckResult>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const CheckResult& r) { return r.verdict == Verdict::kFail; });
}

nlohmann::json ToJson(const std::vector<CheckResult>& results) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& r : results) {
    checks.push_back({{"id", r.id},
                      {"node", r.node},
                      {"verdict", VerdictName(r.verdict)},
                      {"seen", r.seen},
                      {"hint", r.hint}});
  }
  return {{"schema", "sparkctl-preflight/v1"}, {"ok", !AnyFailed(results)}, {"checks", checks}};
}

}  // namespace spark::host
