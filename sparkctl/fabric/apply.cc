#include "sparkctl/fabric/apply.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "base/logging.h"
#include "base/strings.h"
#include "sparkctl/fabric/roce_qos.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kR = kRunDir;
const std::string kS = kStateDir;
constexpr char kEof[] = "SPARKCTL_EOF";

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Tolerant(const netplan::Command& c) { return c.ToString() + " 2>/dev/null || true"; }
std::string Checked(const std::string& line) { return line + " || fail '" + line + "'"; }

// The directories the files go to; the ones apply creates are recorded so reset removes them.
std::vector<std::string> FileDirs(const NodeChanges& n) {
  std::vector<std::string> dirs;
  for (const auto& f : n.files) {
    std::string dir = f.file.path.substr(0, f.file.path.rfind('/'));
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

std::string WireGuardUpLines(const netplan::WireGuardPlan& wg) {
  const std::string& i = wg.interface;
  std::string out =
      "ip link show dev " + i + " >/dev/null 2>&1 || ip link add dev " + i +
      " type wireguard 2>/dev/null || WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 "
      "wireguard-go " + i + " >/dev/null 2>&1 </dev/null || fail 'create " + i +
      ": no WireGuard kernel module and wireguard-go failed (apt install wireguard-go)'\n";
  out += Checked("wg setconf " + i + " " + netplan::WireGuardConfPath(wg)) + "\n";
  out += Checked("ip addr replace " + wg.address.ToString() + " dev " + i) + "\n";
  out += Checked("ip link set dev " + i + " up") + "\n";
  return out;
}

// The kernel adds the RoCE v2 GID of a new address asynchronously: wait up to 5 s for every
// planned device to have an IPv4-mapped RoCE v2 entry, then print the GID tables (for
// NCCL_IB_GID_INDEX) in the same round trip.
std::string GidWaitLines(const NodeChanges& n) {
  std::vector<std::string> devices;
  for (const auto& fi : n.plan.addressing.interfaces) devices.push_back(fi.rdma_device);
  std::string s =
      "has_v4_gid() { for t in /sys/class/infiniband/$1/ports/1/gid_attrs/types/*; do "
      "[ \"$(cat \"$t\" 2>/dev/null)\" = 'RoCE v2' ] || continue; "
      "case \"$(cat /sys/class/infiniband/$1/ports/1/gids/${t##*/} 2>/dev/null)\" in "
      "0000:0000:0000:0000:0000:ffff:*) return 0;; esac; done; return 1; }\n";
  s += "w=0; while [ $w -lt 50 ]; do ok=1; for d in " + Join(devices, " ") +
       "; do has_v4_gid $d || ok=0; done; [ $ok = 1 ] && break; sleep 0.1; w=$((w+1)); done\n";
  s += GidSectionCommand() + "\n";
  return s;
}

std::string ApplyScript(const NodeChanges& n) {
  std::string s = "fail() { echo \"" + n.node + ": failed: $*\" >&2; exit 10; }\n";
  // A timer that already fired has restored the old state: applying now would leave a half
  // state that nothing rolls back.
  s += "[ -e " + kR + "/armed ] || fail 'the rollback timer fired before apply ran (raise "
       "--rollback-after)'\n";
  for (const auto& c : n.runtime) {
    if (c.command) s += Checked(c.command->ToString()) + "\n";
  }
  if (n.wireguard && n.plan.wireguard) s += WireGuardUpLines(*n.plan.wireguard);
  if (n.gid_pending) s += GidWaitLines(n);
  return s;
}

std::string Heredoc(const std::string& path, const std::string& body) {
  std::string text = body.ends_with("\n") || body.empty() ? body : body + "\n";
  return "cat > " + path + " <<'" + kEof + "'\n" + text + kEof + "\n";
}

std::string ArmScript(const NodeChanges& n, std::chrono::seconds after) {
  std::string s = "set -e\numask 077\nmkdir -p " + kR + " " + kS + "\n";
  s += "if [ -s " + kR + "/timer.pid ]; then kill -- -\"$(cat " + kR +
       "/timer.pid)\" 2>/dev/null || true; fi\n";
  s += "rm -rf " + kR + "/backup; mkdir -p " + kR + "/backup\n";
  for (const std::string& d : FileDirs(n)) {
    s += "[ -d " + d + " ] || { mkdir -p " + d + "; echo " + d + " >> " + kS + "/created-dirs; }\n";
  }
  for (size_t i = 0; i < n.files.size(); ++i) {
    const std::string& f = n.files[i].file.path;
    s += "if [ -e " + f + " ]; then cp -p " + f + " " + kR + "/backup/" + std::to_string(i) +
         "; fi\n";
  }
  s += Heredoc(kR + "/rollback.sh", RollbackScript(n));
  s += "rm -f " + kR + "/created-snapshot\n";
  s += "if [ ! -e " + std::string(kSavedSnapshotPath) + " ]; then\n" +
       Heredoc(kSavedSnapshotPath, SavedSnapshotText(n.before)) + "touch " + kR +
       "/created-snapshot\nfi\n";
  s += "touch " + kR + "/armed\n";
  s += "setsid sh -c 'echo $$ > " + kR + "/timer.pid; sleep " + std::to_string(after.count()) +
       "; if [ -e " + kR + "/armed ]; then rm -f " + kR + "/timer.pid; sh " + kR +
       "/rollback.sh > " + kR + "/rollback.log 2>&1; fi' >/dev/null 2>&1 </dev/null &\n";
  s += "echo armed\n";
  return s;
}

// Compares the node's state now with the state read before apply (links and routes of the
// fabric netdevs, sysctls, the WireGuard link). "" when equal, else what differs.
Result<std::string> DiffFromBefore(ssh::Transport& t, const NodeChanges& n,
                                   const netplan::NodeState& target, bool wg_expected) {
  SnapshotRequest req;
  for (const auto& [key, value] : target.sysctls) req.sysctl_keys.push_back(key);
  req.read_wg_key = false;
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(t, n.node, SnapshotCommand(req)));
  SPARK_ASSIGN_OR_RETURN(NodeSnapshot now, ParseSnapshot(r.stdout_data));
  std::vector<std::string> diffs;
  for (const auto& c : netplan::DiffState(ToNodeState(now, n.FabricNetdevs()), target))
    diffs.push_back(c.description);
  if (n.plan.wireguard) {
    bool has = now.FindNetdev(n.plan.wireguard->interface) != nullptr;
    if (has != wg_expected) diffs.push_back(n.plan.wireguard->interface + (has ? " present" : " gone"));
  }
  return Join(diffs, "; ");
}

// Runs `script` with /bin/sh on the node; its output when it exits 0.
Result<ssh::CommandResult> RunScriptOutput(ssh::Transport& t, const std::string& node,
                                           const std::string& script, const std::string& what) {
  ssh::RunOptions run;
  run.stdin_data = script;
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, t.Run(node, "/bin/sh -s", run));
  if (r.ok()) return r;
  return AbortedError(node + ": " + what + " failed (exit " + std::to_string(r.exit_code) +
                      "): " + ssh::Tail(r.stderr_data + r.stdout_data));
}

Status RunScript(ssh::Transport& t, const std::string& node, const std::string& script,
                 const std::string& what) {
  return RunScriptOutput(t, node, script, what).status();
}

// After apply: NCCL_IB_GID_INDEX from the GID tables the apply script printed, now that every
// planned netdev has its address.
Result<int> ReadGidAfterApply(const NodeChanges& n, std::string_view apply_output) {
  SPARK_ASSIGN_OR_RETURN(NodeSnapshot after, ParseSnapshot(apply_output));
  SPARK_ASSIGN_OR_RETURN(std::optional<int> gid, FindGidIndex(n.node, after.rdma, n.plan.addressing,
                                                              n.FabricNetdevs(), nullptr));
  if (!gid) return FailedPreconditionError(n.node + ": the plan gives it no fabric netdev");
  return *gid;
}

// Rolls back every node in `armed` in parallel and checks each is as it was before.
Status RollbackAll(ssh::Transport& t, const ClusterChanges& c, const std::vector<std::string>& armed) {
  auto results = ssh::ForEachNode<bool>(armed, [&](const std::string& node) -> Result<bool> {
    SPARK_RETURN_IF_ERROR(RollbackNode(t, node));
    const NodeChanges* n = c.Find(node);
    bool wg_before = n->plan.wireguard && n->before.FindNetdev(n->plan.wireguard->interface);
    SPARK_ASSIGN_OR_RETURN(std::string diff,
                           DiffFromBefore(t, *n, ToNodeState(n->before, n->FabricNetdevs()),
                                          wg_before));
    if (!diff.empty()) return DataLossError(node + ": after rollback still differs: " + diff);
    return true;
  });
  return ssh::JoinNodeErrors(results);
}

}  // namespace

std::string RollbackScript(const NodeChanges& n) {
  std::string s = "#!/bin/sh\n# Written by `sparkctl net apply` on " + n.node +
                  ": restores the fabric state read before that apply.\n";
  s += "rm -f " + kR + "/armed\n";
  s += "if [ -s " + kR + "/timer.pid ]; then kill -- -\"$(cat " + kR +
       "/timer.pid)\" 2>/dev/null; rm -f " + kR + "/timer.pid; fi\n";
  if (n.wireguard && n.plan.wireguard) {
    const std::string& i = n.plan.wireguard->interface;
    if (!n.before.FindNetdev(i)) s += "ip link del dev " + i + " 2>/dev/null || true\n";
  }
  for (size_t i = 0; i < n.files.size(); ++i) {
    const std::string& f = n.files[i].file.path;
    std::string b = kR + "/backup/" + std::to_string(i);
    s += "if [ -e " + b + " ]; then cp -p " + b + " " + f + "; else rm -f " + f + "; fi\n";
  }
  if (n.wireguard && n.plan.wireguard && n.before.FindNetdev(n.plan.wireguard->interface)) {
    s += "wg setconf " + n.plan.wireguard->interface + " " +
         netplan::WireGuardConfPath(*n.plan.wireguard) + " 2>/dev/null || true\n";
  }
  netplan::NodeState desired = netplan::DesiredState(n.plan);
  for (const auto& c : netplan::DiffState(desired, ToNodeState(n.before, n.FabricNetdevs()))) {
    if (c.command) s += Tolerant(*c.command) + "\n";
  }
  if (n.qos) {
    std::set<std::string> set = n.FabricNetdevs();
    s += QosResetCommands({set.begin(), set.end()});
  }
  s += "if [ -e " + kR + "/created-snapshot ]; then\n"
       "  if [ -e " + kS + "/created-dirs ]; then while read -r d; do rmdir \"$d\" 2>/dev/null; "
       "done < " + kS + "/created-dirs; fi\n"
       "  rm -rf " + kS + " " + kR + "/created-snapshot\nfi\n";
  s += "echo rolled-back\n";
  return s;
}

Status ArmRollback(ssh::Transport& t, const NodeChanges& n, std::chrono::seconds after) {
  return RunScript(t, n.node, ArmScript(n, after), "arming the rollback timer");
}

Status ApplyNode(ssh::Transport& t, const NodeChanges& n, int* gid_index) {
  for (const auto& f : n.files) {
    Status s = t.WriteFile(n.node, f.file.path, f.file.content, f.file.mode);
    if (!s.ok()) return s.WithContext(n.node + ": writing " + f.file.path);
  }
  if (n.qos) {
    std::set<std::string> set = n.FabricNetdevs();
    SPARK_RETURN_IF_ERROR(RunScript(t, n.node,
                                    "set -e\n" + QosApplyCommands({set.begin(), set.end()}),
                                    "lossless RoCE (dcb, mlx5 ECN)"));
  }
  if (n.runtime.empty() && !n.wireguard && !n.gid_pending) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, RunScriptOutput(t, n.node, ApplyScript(n), "apply"));
  if (!n.gid_pending) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(int gid, ReadGidAfterApply(n, r.stdout_data));
  if (gid_index) *gid_index = gid;
  return Status::Ok();
}

Status RollbackNode(ssh::Transport& t, const std::string& node) {
  std::string cmd = "if [ -e " + kR + "/rollback.sh ]; then sh " + kR +
                    "/rollback.sh; else echo 'nothing armed' >&2; exit 44; fi";
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, t.Run(node, cmd));
  if (r.exit_code == 44) return NotFoundError(node + ": no rollback armed (" + kR + "/rollback.sh)");
  if (!r.ok()) return ssh::CommandFailedError(node, "rollback", r);
  return Status::Ok();
}

Status ConfirmNode(ssh::Transport& t, const std::string& node) {
  std::string cmd = "rm -f " + kR + "/armed " + kR + "/created-snapshot; if [ -s " + kR +
                    "/timer.pid ]; then kill -- -\"$(cat " + kR + "/timer.pid)\" 2>/dev/null; fi; rm -f " +
                    kR + "/timer.pid";
  return ssh::RunChecked(t, node, cmd).status();
}

Status ApplyReport::Outcome() const {
  for (const auto& n : nodes) {
    if (!n.status.ok()) return AbortedError(n.status.message() + (rolled_back ? " (rolled back)" : ""));
  }
  if (rolled_back) return AbortedError(rollback_reason + " (rolled back)");
  return Status::Ok();
}

Result<ApplyReport> ApplyCluster(ssh::Transport& t, const netplan::ClusterSpec& spec,
                                 const ApplyOptions& options) {
  auto start = Clock::now();
  SPARK_ASSIGN_OR_RETURN(ClusterChanges changes, PlanChanges(t, spec, options.plan));
  std::vector<std::string> keyless;
  for (const auto& n : changes.nodes) {
    if (n.needs_key) keyless.push_back(n.node);
  }
  if (!keyless.empty()) {
    SPARK_RETURN_IF_ERROR(EnsureWireGuardKeys(t, keyless));
    SPARK_ASSIGN_OR_RETURN(changes, PlanChanges(t, spec, options.plan));
  }
  ApplyReport report;
  std::vector<std::string> names;
  for (const auto& n : changes.nodes) names.push_back(n.node);
  std::vector<char> armed(names.size(), 0);
  auto results = ssh::ForEachNode<size_t>(names, [&](const std::string& node) -> Result<size_t> {
    size_t i = std::find(names.begin(), names.end(), node) - names.begin();
    NodeChanges& n = changes.nodes[i];
    if (n.Count() == 0) return size_t{0};
    SPARK_RETURN_IF_ERROR(ArmRollback(t, n, options.rollback_after));
    armed[i] = 1;
    int gid = -1;
    SPARK_RETURN_IF_ERROR(ApplyNode(t, n, &gid));
    if (n.gid_pending) SetGidIndex(&n, gid);
    return n.Count();
  });
  bool failed = false;
  for (size_t i = 0; i < names.size(); ++i) {
    changes.fabric.nodes[i] = changes.nodes[i].plan;  // with the GID index apply read
    report.nodes.push_back({names[i], changes.nodes[i].Count(), results[i].status()});
    if (results[i].ok()) report.nodes.back().status = Status::Ok();
    failed = failed || !results[i].ok();
  }
  std::vector<std::string> armed_nodes;
  for (size_t i = 0; i < names.size(); ++i) {
    if (armed[i]) armed_nodes.push_back(names[i]);
  }
  if (!failed) {
    Result<VerifyReport> v = VerifyCluster(t, changes, options.verify);
    if (!v.ok()) {
      failed = true;
      report.rollback_reason = "verify could not run: " + v.status().message();
    } else {
      report.verify = *v;
      if (!v->ok() && options.require_verify) {
        failed = true;
        report.rollback_reason = "verify failed after apply:\n" + v->Summary();
      }
    }
  } else {
    report.rollback_reason = "apply failed on a node";
  }
  if (failed && !armed_nodes.empty()) {
    Logger("fabric")->warn("rolling back {}: {}", Join(armed_nodes, ", "), report.rollback_reason);
    report.rolled_back = true;
    report.rollback_status = RollbackAll(t, changes, armed_nodes);
  } else if (failed) {
    report.rolled_back = true;  // nothing was changed, nothing to undo
  } else {
    auto confirmed = ssh::ForEachNode<bool>(armed_nodes, [&](const std::string& node) -> Result<bool> {
      SPARK_RETURN_IF_ERROR(ConfirmNode(t, node));
      return true;
    });
    SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(confirmed));
  }
  report.changes = std::move(changes);
  report.seconds = Since(start);
  return report;
}

std::vector<std::string> ResetScriptLines(const NodeChanges& n,
                                          const std::optional<NodeSnapshot>& saved) {
  std::vector<std::string> lines;
  if (n.plan.wireguard) {
    const std::string& i = n.plan.wireguard->interface;
    if (n.before.FindNetdev(i) && !(saved && saved->FindNetdev(i)))
      lines.push_back("ip link del dev " + i + " 2>/dev/null || true");
  }
  if (saved) {
    for (const auto& c : netplan::DiffState(ToNodeState(n.before, n.FabricNetdevs()),
                                            ToNodeState(*saved, n.FabricNetdevs()))) {
      if (c.command) lines.push_back(Tolerant(*c.command));
    }
  } else {
    netplan::NodeState now = ToNodeState(n.before, n.FabricNetdevs());
    // No saved state: undo only what the plan adds and the node has.
    if (!netplan::DiffState(now, netplan::DesiredState(n.plan)).empty() &&
        n.before.files.empty()) {
      return lines;  // nothing of sparkctl's is here
    }
    for (const auto& c : netplan::ResetCommands(n.plan)) lines.push_back(Tolerant(c));
  }
  for (const std::string& path : netplan::ResetFiles(n.plan)) {
    if (n.before.files.count(path)) lines.push_back("rm -f " + path);
  }
  if (n.plan.kind == netplan::TopologyKind::kSwitched) {
    std::set<std::string> set = n.FabricNetdevs();
    std::istringstream reset(QosResetCommands({set.begin(), set.end()}));
    for (std::string line; std::getline(reset, line);) lines.push_back(line);
  }
  if (saved || !n.before.wg_private_key.empty()) {
    lines.push_back("if [ -e " + kS + "/created-dirs ]; then while read -r d; do rmdir \"$d\" "
                    "2>/dev/null; done < " + kS + "/created-dirs; fi; rm -rf " + kS);
  }
  return lines;
}

Result<ResetReport> ResetCluster(ssh::Transport& t, const netplan::ClusterSpec& spec,
                                 const PlanOptions& options) {
  auto start = Clock::now();
  SPARK_ASSIGN_OR_RETURN(ClusterChanges changes, PlanChanges(t, spec, options));
  std::vector<std::string> names;
  for (const auto& n : changes.nodes) names.push_back(n.node);
  auto results = ssh::ForEachNode<size_t>(names, [&](const std::string& node) -> Result<size_t> {
    const NodeChanges& n = *changes.Find(node);
    std::optional<NodeSnapshot> saved;
    if (n.before.has_saved_snapshot) {
      SPARK_ASSIGN_OR_RETURN(std::string text, t.ReadFile(node, kSavedSnapshotPath));
      SPARK_ASSIGN_OR_RETURN(saved, ParseSnapshot(text));
    }
    std::vector<std::string> lines = ResetScriptLines(n, saved);
    std::string script = "if [ -s " + kR + "/timer.pid ]; then kill -- -\"$(cat " + kR +
                         "/timer.pid)\" 2>/dev/null; fi; rm -rf " + kR + "\n" + Join(lines, "\n") +
                         "\n";
    SPARK_RETURN_IF_ERROR(RunScript(t, node, script, "reset"));
    netplan::NodeState target = saved ? ToNodeState(*saved, n.FabricNetdevs())
                                      : netplan::NodeState{};
    if (saved) {
      bool wg_saved = n.plan.wireguard && saved->FindNetdev(n.plan.wireguard->interface);
      SPARK_ASSIGN_OR_RETURN(std::string diff, DiffFromBefore(t, n, target, wg_saved));
      if (!diff.empty()) {
        return DataLossError(node + ": after reset the state still differs from before apply: " +
                             diff + "; run `sparkctl net reset` again or fix it by hand");
      }
    }
    return lines.size();
  });
  ResetReport report;
  for (size_t i = 0; i < names.size(); ++i) {
    report.nodes.push_back({names[i], results[i].ok() ? *results[i] : 0,
                            results[i].ok() ? Status::Ok() : results[i].status()});
  }
  report.seconds = Since(start);
  return report;
}

}  // namespace spark::fabric
