// `sparkctl selftest` (see selftest.h).
#include "sparkctl/selftest/selftest.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"
#include "sparkctl/bench/launch.h"
#include "sparkctl/bench/link_bench.h"
#include "sparkctl/fabric/fabric_verify.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/selftest/nccl_version.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::selftest {
namespace {

using host::CheckResult;
using host::Verdict;
using Clock = std::chrono::steady_clock;

// `spark-bench nccl-info` on the node (`bench_path` from bench::InstallBench).
Result<bench::NcclProbe> RemoteNccl(ssh::Transport& t, const std::string& node,
                                    const std::string& bench_path, const std::string& engine) {
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                         ssh::RunChecked(t, node, ssh::ShellQuote(bench_path) +
                                                      " nccl-info --engine " + ssh::ShellQuote(engine)));
  try {
    return bench::NcclProbeFromJson(nlohmann::json::parse(r.stdout_data));
  } catch (const nlohmann::json::exception& e) {
    return InternalError(node + ": spark-bench nccl-info printed no JSON: " + e.what());
  }
}

CheckResult Check(std::string id, std::string node, Verdict v, std::string seen,
                  std::string hint = "") {
  return {std::move(id), std::move(node), v, std::move(seen), std::move(hint)};
}

std::string Upper(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void NetChecks(ssh::Transport& t, const Result<fabric::ClusterChanges>& changes, bool wireguard,
               SelftestReport* r) {
  if (!changes.ok()) {
    r->checks.push_back(Check("NET.PLAN", "", Verdict::kFail, changes.status().message(),
                              "run `sparkctl discover` and `sparkctl net apply` first"));
    return;
  }
  fabric::VerifyOptions vo;
  vo.wireguard = wireguard;
  auto v = fabric::VerifyCluster(t, *changes, vo);
  if (!v.ok()) {
    r->checks.push_back(Check("NET.VERIFY", "", Verdict::kFail, v.status().message(),
                              "check that every node answers over SSH"));
    return;
  }
  // The suspect cables first: the per-check failures below are their symptoms.
  for (const std::string& cable : v->suspect_cables) {
    r->checks.push_back(Check("NET.CABLE", "", Verdict::kFail, cable,
                              "reseat or replace " + cable + ", then `sparkctl selftest` again"));
  }
  for (const fabric::VerifyCheck& c : v->checks) {
    if (c.ok) continue;
    std::string hint = c.cable.empty() ? c.detail : "check " + c.cable + " (" + c.detail + ")";
    // A tunnel that does not answer moves the control traffic to the management LAN (the
    // CONTROL.PLANE check says so); the fabric itself still works.
    const bool tunnel = c.kind == "wireguard";
    if (tunnel) hint = "control traffic falls back to the management LAN; `sparkctl net apply`";
    r->checks.push_back(Check("NET." + Upper(c.kind), c.node, tunnel ? Verdict::kWarn : Verdict::kFail,
                              c.target + (c.detail.empty() ? "" : ": " + c.detail), hint));
  }
  if (v->ok()) {
    r->checks.push_back(Check("NET.VERIFY", "", Verdict::kOk,
                              std::to_string(v->checks.size()) + " checks passed"));
  }
}

// Switched fabrics: PFC, DSCP trust and ECN for RoCE on every node (fabric/roce_qos.h), as
// PlanChanges read them.
void QosChecks(const fabric::ClusterChanges& changes, SelftestReport* r) {
  if (changes.spec.fabric.kind != netplan::TopologyKind::kSwitched) return;
  for (const auto& n : changes.nodes) {
    if (n.qos) {
      r->checks.push_back(Check("ROCE.LOSSLESS", n.node, Verdict::kFail, n.qos_why,
                                "`sparkctl net apply` sets them; the switch must match (PFC and "
                                "DSCP trust on priority 3, ECN marking, docs/fabric.md)"));
    } else {
      r->checks.push_back(Check("ROCE.LOSSLESS", n.node, Verdict::kOk,
                                "PFC, DSCP trust (26 -> priority 3) and ECN on priority 3 of " +
                                    std::to_string(n.FabricNetdevs().size()) + " netdevs"));
    }
  }
}

// The ranks of the all-reduce check, on the control plane `up` gives the engine: the
// WireGuard tunnel when it works, else the management LAN (a warning says why).
std::vector<bench::ClusterRank> Ranks(ssh::Transport& t, const netplan::ClusterSpec& spec,
                                      const Result<fabric::ClusterChanges>& changes,
                                      SelftestReport* r) {
  if (!changes.ok()) {
    std::vector<bench::ClusterRank> ranks;
    for (const auto& n : spec.nodes) ranks.push_back({n.name, n.address, {}});
    return ranks;
  }
  const fabric::ControlPlane control = fabric::ProbeControlPlane(t, *changes);
  if (control.wireguard) {
    r->checks.push_back(Check("CONTROL.PLANE", "", Verdict::kOk,
                              "control traffic over " + control.Describe()));
  } else {
    r->checks.push_back(Check("CONTROL.PLANE", "", Verdict::kWarn,
                              "control traffic over the " + control.Describe(),
                              "the rendezvous, Gloo and NCCL's bootstrap run in plaintext on the "
                              "management LAN until the tunnel works"));
  }
  return bench::ClusterRanks(*changes, control);
}

void AllReduceCheck(ssh::Transport& t, const std::string& program, const SelftestOptions& o,
                    const std::vector<bench::ClusterRank>& ranks, SelftestReport* r) {
  bench::CollectiveOptions co;
  co.min_bytes = 1 << 10;
  co.max_bytes = o.full ? 64u << 20 : 1u << 20;
  co.step_factor = 4;
  co.iters = 2;
  co.warmup_iters = 1;
  co.check = 1;
  co.json = true;
  co.timeout = std::chrono::seconds(60);
  auto run = bench::RunCluster(t, program, co, ranks, o.master_port, std::chrono::seconds(180));
  std::string what = std::to_string(ranks.size()) + " ranks, 1 KiB.." + HumanBytes(co.max_bytes);
  if (!run.ok()) {
    r->checks.push_back(Check("ALLREDUCE.CORRECT", "", Verdict::kFail, run.status().message(),
                              "fix the failures above; `sparkctl bench allreduce --cluster FILE` "
                              "shows the full run"));
    return;
  }
  try {
    auto j = nlohmann::json::parse(run->output);
    int64_t bad = j.at("out_of_bounds").at("count").get<int64_t>();
    std::string backend = j.at("backend").get<std::string>();
    if (bad == 0 && run->exit_code == 0) {
      r->checks.push_back(Check("ALLREDUCE.CORRECT", "", Verdict::kOk,
                                what + " over " + backend + ": every sum exact"));
    } else {
      r->checks.push_back(Check("ALLREDUCE.CORRECT", "", Verdict::kFail,
                                what + " over " + backend + ": " + std::to_string(bad) +
                                    " size(s) with wrong sums",
                                "a rank computes or transports wrong data: run `sparkctl bench "
                                "allreduce --cluster FILE` and check GPU health (nvidia-smi -q)"));
    }
  } catch (const nlohmann::json::exception& e) {
    r->checks.push_back(Check("ALLREDUCE.CORRECT", "", Verdict::kFail,
                              "rank 0 printed no report: " + run->output.substr(0, 200)));
  }
}

void LinkChecks(ssh::Transport& t, const fabric::ClusterChanges& c, const std::string& program,
                SelftestReport* r) {
  bench::LinkBenchOptions lo;
  lo.duration = std::chrono::milliseconds(500);
  lo.pingpongs = 200;
  auto report = bench::RunLinkBench(t, c, program, lo);
  if (!report.ok()) {
    r->checks.push_back(Check("LINK.PINGPONG", "", Verdict::kFail, report.status().message()));
    return;
  }
  for (const bench::LinkBenchRow& row : report->rows) {
    if (!row.status.ok()) {
      r->checks.push_back(Check("LINK.PINGPONG", row.pair.client, Verdict::kFail,
                                row.status.message(), "check " + row.pair.label));
      continue;
    }
    char seen[200];
    std::snprintf(seen, sizeof(seen), "%s p50 %.1f us p99 %.1f us %.1f Gbit/s",
                  row.result.transport == "tcp" ? "TCP (not RDMA)" : "RDMA RC",
                  row.result.latency.p50_us, row.result.latency.p99_us, row.result.gbps);
    r->checks.push_back(Check("LINK.PINGPONG", row.pair.client, Verdict::kOk,
                              row.pair.label + ": " + seen));
  }
}

}  // namespace

bool SelftestReport::ok() const { return !host::AnyFailed(checks); }

std::string SelftestReport::Summary() const {
  std::string out;
  for (const CheckResult& c : checks) {
    if (c.verdict == Verdict::kOk) continue;
    std::string where = c.node.empty() ? "" : " " + c.node;
    out += (c.verdict == Verdict::kFail ? "FAIL " : "warn ") + c.id + where + ": " + c.seen + "\n";
    if (!c.hint.empty()) out += "  fix: " + c.hint + "\n";
  }
  if (ok()) out += "All checks passed.\n";
  return out;
}

const std::vector<std::string>& FabricPreflightIds() {
  static const std::vector<std::string> kIds = {
      "SSH.REACHABLE", "FABRIC.LINK_UP", "FABRIC.MTU", "RDMA.PORT_ACTIVE", "ROCE.GID_V2_IPV4",
      "FIREWALL.FORWARD", "NCCL_CONF.ABSENT"};
  return kIds;
}

std::vector<CheckResult> RdmaChecks(const std::string& node, const host::NodeFacts& f,
                                    const Result<rdma::VerbsReport>& verbs) {
  std::vector<CheckResult> out;
  std::vector<std::string> names;
  for (const auto& d : f.rdma) names.push_back(d.name);
  if (f.rdma.empty()) {
    out.push_back(Check("RDMA.DEVICES", node, Verdict::kFail, "no device in /sys/class/infiniband",
                        "check the ConnectX-7 (lspci | grep -i mellanox) and load mlx5_core and "
                        "mlx5_ib"));
  } else {
    out.push_back(Check("RDMA.DEVICES", node, Verdict::kOk, Join(names, ", ")));
  }
  std::vector<std::string> small;
  for (const auto& d : f.rdma) {
    if (d.state == "ACTIVE" && d.active_mtu < 4096)
      small.push_back(d.name + " " + std::to_string(d.active_mtu));
  }
  if (!f.rdma.empty()) {
    out.push_back(small.empty()
                      ? Check("RDMA.ACTIVE_MTU", node, Verdict::kOk, "4096 on every active port")
                      : Check("RDMA.ACTIVE_MTU", node, Verdict::kFail, Join(small, ", "),
                              "RoCE picks MTU 4096 only when the netdev MTU is 9000: run "
                              "`sparkctl net apply`"));
  }
  if (!verbs.ok()) {
    out.push_back(Check("RDMA.VERBS", node, Verdict::kFail, verbs.status().message(),
                        "spark-bench rdma-info failed on the node; run it there by hand"));
    return out;
  }
  if (!verbs->AnyOpened()) {
    out.push_back(Check("RDMA.VERBS", node, Verdict::kWarn,
                        rdma::NoVerbsDeviceMessage(*verbs, names)));
    return out;
  }
  std::vector<std::string> failed, opened, mismatched;
  for (const auto& d : verbs->devices) {
    (d.opened ? opened : failed).push_back(d.name + (d.opened ? "" : " (" + d.error + ")"));
    const host::RdmaDeviceFacts* sys = f.FindRdma(d.name);
    if (!d.opened || !sys || d.ports.empty() || !sys->RoceV2Ipv4Index()) continue;
    size_t idx = *sys->RoceV2Ipv4Index();
    const auto& gids = d.ports[0].gids;
    std::string sysfs_gid = sys->gids.empty() ? "" : [&] {
      for (const auto& g : sys->gids) if (g.index == static_cast<int>(idx)) return g.gid;
      return std::string();
    }();
    if (idx >= gids.size() || gids[idx] != sysfs_gid) mismatched.push_back(d.name + " index " + std::to_string(idx));
  }
  if (!failed.empty()) {
    out.push_back(Check("RDMA.VERBS", node, Verdict::kFail, "cannot open " + Join(failed, ", "),
                        "check /dev/infiniband/uverbs* permissions and the mlx5_ib module"));
  } else {
    out.push_back(Check("RDMA.VERBS", node, Verdict::kOk, "opened " + Join(opened, ", ")));
  }
  if (!mismatched.empty()) {
    out.push_back(Check("RDMA.GID_TABLE", node, Verdict::kFail,
                        "verbs and sysfs disagree on " + Join(mismatched, ", "),
                        "the GID table changed while reading: rerun; if it persists, reboot"));
  }
  return out;
}

Result<SelftestReport> RunSelftest(ssh::Transport& t, const netplan::ClusterSpec& spec,
                                   const SelftestOptions& o) {
  auto start = Clock::now();
  std::string program;  // "" = the spark-bench of each node's bundle
  if (!o.bench_program.empty()) {
    SPARK_ASSIGN_OR_RETURN(program, bench::FindBenchProgram(o.bench_program));
  }
  SelftestReport r;
  std::vector<host::NodeObservation> obs = host::CollectFacts(t, spec, "/");
  host::PreflightInput in;
  in.cluster = &spec;
  in.nodes = obs;
  const auto& ids = FabricPreflightIds();
  for (CheckResult& c : host::RunChecks(in)) {
    if (std::find(ids.begin(), ids.end(), c.id) != ids.end()) r.checks.push_back(std::move(c));
  }
  fabric::PlanOptions po;
  po.control_plane = o.wireguard;
  Result<fabric::ClusterChanges> changes = fabric::PlanChanges(t, spec, po);
  NetChecks(t, changes, o.wireguard, &r);
  if (changes.ok()) QosChecks(*changes, &r);
  std::vector<std::string> nodes;
  for (const auto& n : obs) nodes.push_back(n.name);
  auto verbs = ssh::ForEachNode<rdma::VerbsReport>(nodes, [&](const std::string& node)
                                                              -> Result<rdma::VerbsReport> {
    SPARK_ASSIGN_OR_RETURN(std::string bench_path, bench::InstallBench(t, node, program));
    return bench::RemoteVerbs(t, node, bench_path);
  });
  for (size_t i = 0; i < obs.size(); ++i) {
    if (!obs[i].facts.ok()) continue;  // SSH.REACHABLE already failed for it
    for (CheckResult& c : RdmaChecks(obs[i].name, *obs[i].facts, verbs[i])) r.checks.push_back(c);
  }
  auto nccl = ssh::ForEachNode<bench::NcclProbe>(nodes, [&](const std::string& node)
                                                             -> Result<bench::NcclProbe> {
    SPARK_ASSIGN_OR_RETURN(std::string bench_path, bench::InstallBench(t, node, program));
    const std::string engine = !o.engine_path.empty()
                                   ? o.engine_path
                                   : bench_path.substr(0, bench_path.rfind('/') + 1) + "spark-engine";
    return RemoteNccl(t, node, bench_path, engine);
  });
  for (size_t i = 0; i < obs.size(); ++i) {
    if (!obs[i].facts.ok()) continue;
    if (!nccl[i].ok()) {
      r.checks.push_back(Check("NCCL.VERSION", obs[i].name, Verdict::kWarn,
                               nccl[i].status().message(),
                               "run `spark-bench nccl-info --engine " +
                                   (o.engine_path.empty() ? "<bundle>/bin/spark-engine"
                                                          : o.engine_path) +
                                   "` on the node"));
      continue;
    }
    for (CheckResult& c : NcclVersionChecks(obs[i].name, *nccl[i])) r.checks.push_back(c);
  }
  if (o.full && changes.ok()) LinkChecks(t, *changes, program, &r);
  AllReduceCheck(t, program, o, Ranks(t, spec, changes, &r), &r);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

nlohmann::ordered_json ToJson(const SelftestReport& r) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const CheckResult& c : r.checks) {
    checks.push_back({{"id", c.id}, {"node", c.node}, {"verdict", host::VerdictName(c.verdict)},
                      {"seen", c.seen}, {"hint", c.hint}});
  }
  return {{"schema", "sparkctl-selftest/v1"}, {"ok", r.ok()}, {"seconds", r.seconds},
          {"checks", checks}};
}

}  // namespace spark::selftest
