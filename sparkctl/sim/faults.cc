#include "sparkctl/sim/faults.h"

#include <algorithm>
#include <array>
#include <optional>

#include "base/strings.h"
#include "sparkctl/sim/network.h"
#include "sparkctl/sim/node_image.h"
#include "sparkctl/sim/node_process.h"

namespace spark::sim {
namespace {

struct KindInfo {
  FaultKind kind;
  const char* name;
  const char* args;  // usage of the arguments; the count of words is the arity
  const char* help;
};

constexpr std::array<KindInfo, 16> kKinds = {{
    {FaultKind::kUnplug, "unplug", "NODE PORT", "pull the cable at NODE's PORT (0|1)"},
    {FaultKind::kPlug, "plug", "NODE PORT", "plug it back"},
    {FaultKind::kSwap, "swap", "NODE PORT", "cross the cable's twins at NODE's PORT (again: undo)"},
    {FaultKind::kMiscable, "miscable", "", "turn the ring's first cable into p0-p0 (again: undo)"},
    {FaultKind::kKernel, "kernel", "NODE RELEASE", "report kernel RELEASE (default: undo)"},
    {FaultKind::kCma, "cma", "NODE KIB", "set CmaTotal/CmaFree to KIB (default: undo)"},
    {FaultKind::kMemlock, "memlock", "NODE VALUE", "memlock limit in KiB or unlimited (default)"},
    {FaultKind::kSshd, "sshd", "NODE ACTION", "stop or start the node's sshd"},
    {FaultKind::kMachineId, "machine-id", "NODE VALUE", "set /etc/machine-id (default: undo)"},
    {FaultKind::kForwardDrop, "forward-drop", "NODE", "iptables FORWARD policy DROP"},
    {FaultKind::kForwardAccept, "forward-accept", "NODE", "FORWARD policy ACCEPT again"},
    {FaultKind::kKill, "kill", "NODE PATTERN", "SIGKILL the node's processes matching PATTERN"},
    {FaultKind::kMemory, "memory", "NODE KIB", "set MemAvailable to KIB (default: undo)"},
    {FaultKind::kMachine, "machine", "NODE NAME", "uname -m reports NAME, e.g. aarch64 (default: undo)"},
    {FaultKind::kGlibc, "glibc", "NODE VERSION", "getconf reports glibc VERSION (default: undo)"},
    {FaultKind::kClear, "clear", "", "undo every fault"},
}};

int Arity(const KindInfo& k) { return Split(k.args, ' ', true).size(); }

Result<int> ParsePort(const std::string& text) {
  if (text == "0" || text == "p0") return 0;
  if (text == "1" || text == "p1") return 1;
  return InvalidArgumentError("port '" + text + "' must be 0 or 1 (p0, p1)");
}

Status CheckValue(const Fault& f) {
  if (f.value == "default") return Status::Ok();
  switch (f.kind) {
    case FaultKind::kCma:
      if (!ParseInt(f.value) || *ParseInt(f.value) < 0)
        return InvalidArgumentError("cma wants a size in KiB (e.g. 0), not '" + f.value + "'");
      return Status::Ok();
    case FaultKind::kMemlock:
      return MemlockPrlimitArg(f.value).status();
    case FaultKind::kMemory:
      if (!ParseInt(f.value) || *ParseInt(f.value) < 0)
        return InvalidArgumentError("memory wants MemAvailable in KiB (e.g. 2097152), not '" +
                                    f.value + "'");
      return Status::Ok();
    case FaultKind::kSshd:
      if (f.value == "stop" || f.value == "start") return Status::Ok();
      return InvalidArgumentError("sshd wants stop or start, not '" + f.value + "'");
    case FaultKind::kMachineId: {
      bool hex = f.value.size() == 32 && std::all_of(f.value.begin(), f.value.end(), [](char c) {
                   return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                 });
      if (hex) return Status::Ok();
      return InvalidArgumentError("machine-id wants 32 lowercase hex digits, not '" + f.value +
                                  "'");
    }
    case FaultKind::kMachine:
    case FaultKind::kGlibc:
      if (!f.value.empty() && f.value.find_first_of(" \t\n'\"\\$`") == std::string::npos) {
        return Status::Ok();
      }
      return InvalidArgumentError("'" + f.value + "' is not a single word");
    default:
      return Status::Ok();
  }
}

Status ApplyFabric(Runner& runner, ClusterState& c, const Fault& f, const NodeState* node) {
  const FabricFaults before = c.fabric;
  PortRef ref = node ? PortRef{node->rank, f.port} : PortRef{};
  auto toggle = [](std::set<PortRef>& set, PortRef p) {
    if (!set.erase(p)) set.insert(p);
  };
  if (f.kind == FaultKind::kUnplug) c.fabric.unplugged.insert(ref);
  if (f.kind == FaultKind::kPlug) c.fabric.unplugged.erase(ref);
  if (f.kind == FaultKind::kSwap) toggle(c.fabric.swapped, ref);
  if (f.kind == FaultKind::kMiscable) {
    if (c.topology == Topology::kPair || c.topology == Topology::kSwitched)
      return FailedPreconditionError("miscable needs a ring or line; a " +
                                     std::string(TopologyName(c.topology)) +
                                     " has no ring cable to turn into p0-p0");
    c.fabric.miscabled = !c.fabric.miscabled;
  }
  if (f.kind == FaultKind::kClear) c.fabric = {};
  return Rewire(runner, c, before);
}

// The running sshd listener of a node, if any.
std::optional<int> SshdPid(const std::string& dir, const NodeState& n) {
  Result<std::string> text = ReadFile(NodeDir(dir, n) + "/sshd.pid");
  std::optional<int64_t> pid = text.ok() ? ParseInt(Trim(*text)) : std::nullopt;
  if (!pid || !ProcessAlive(*pid)) return std::nullopt;
  return static_cast<int>(*pid);
}

// New SSH sessions inherit the listener's limit, so the listener restarts with the new one
// (open sessions keep theirs, as after editing limits.conf). A restart rather than
// `prlimit --pid` because raising a hard limit needs CAP_SYS_RESOURCE, which some hosts lack.
Status SetMemlock(Runner& runner, const std::string& dir, NodeState& n) {
  SPARK_RETURN_IF_ERROR(MemlockPrlimitArg(n.facts.memlock).status());
  if (!SshdPid(dir, n)) return Status::Ok();
  SPARK_RETURN_IF_ERROR(StopSshd(dir, n));
  return StartSshd(runner, dir, n);
}

Status SetForward(Runner& runner, const NodeState& n, bool drop) {
  return RunOk(runner, InNode(n, {"iptables", "-P", "FORWARD", drop ? "DROP" : "ACCEPT"}));
}

Status SetSshd(Runner& runner, const std::string& dir, NodeState& n, bool run) {
  bool alive = SshdPid(dir, n).has_value();
  if (run && !alive) SPARK_RETURN_IF_ERROR(StartSshd(runner, dir, n));
  if (!run && alive) SPARK_RETURN_IF_ERROR(StopSshd(dir, n));
  n.facts.sshd_running = run;
  return Status::Ok();
}

Status ResetNode(Runner& runner, const std::string& dir, const std::string& memlock, NodeState& n) {
  n.facts.kernel_release = kDefaultKernel;
  n.facts.cma_kib = kDefaultCmaKib;
  n.facts.mem_available_kib = kDefaultMemAvailableKib;
  n.facts.memlock = memlock;
  n.facts.machine_id = n.default_machine_id;
  n.facts.machine.clear();
  n.facts.glibc.clear();
  SPARK_RETURN_IF_ERROR(WriteNodeFacts(dir, n));
  SPARK_RETURN_IF_ERROR(SetMemlock(runner, dir, n));
  if (n.facts.forward_drop) SPARK_RETURN_IF_ERROR(SetForward(runner, n, false));
  n.facts.forward_drop = false;
  return SetSshd(runner, dir, n, true);
}

Status ApplyNodeFault(Runner& runner, const std::string& dir, const ClusterState& c, NodeState& n,
                      const Fault& f) {
  const bool reset = f.value == "default";
  NodeFacts& facts = n.facts;
  switch (f.kind) {
    case FaultKind::kKernel:
      facts.kernel_release = reset ? kDefaultKernel : f.value;
      break;
    case FaultKind::kCma:
      facts.cma_kib = reset ? kDefaultCmaKib : *ParseInt(f.value);
      break;
    case FaultKind::kMemory:
      facts.mem_available_kib = reset ? kDefaultMemAvailableKib : *ParseInt(f.value);
      break;
    case FaultKind::kMachineId:
      facts.machine_id = reset ? n.default_machine_id : f.value;
      break;
    case FaultKind::kMachine:
      facts.machine = reset ? "" : f.value;
      break;
    case FaultKind::kGlibc:
      facts.glibc = reset ? "" : f.value;
      break;
    case FaultKind::kMemlock:
      facts.memlock = reset ? c.default_memlock : f.value;
      SPARK_RETURN_IF_ERROR(WriteNodeFacts(dir, n));
      return SetMemlock(runner, dir, n);
    case FaultKind::kSshd:
      return SetSshd(runner, dir, n, f.value == "start");
    case FaultKind::kForwardDrop:
    case FaultKind::kForwardAccept:
      facts.forward_drop = f.kind == FaultKind::kForwardDrop;
      return SetForward(runner, n, facts.forward_drop);
    case FaultKind::kKill: {
      SPARK_ASSIGN_OR_RETURN(int killed, KillMatching(runner, n, f.value));
      if (killed > 0) return Status::Ok();
      return NotFoundError("no process on " + n.name + " matches '" + f.value +
                           "'; see `sparkctl sim exec " + n.name + " -- ps -ef`");
    }
    default:
      return InternalError("not a node fault");
  }
  return WriteNodeFacts(dir, n);
}

bool IsFabric(FaultKind k) {
  return k == FaultKind::kUnplug || k == FaultKind::kPlug || k == FaultKind::kSwap ||
         k == FaultKind::kMiscable;
}

Status RefreshAll(Runner& runner, const ClusterState& c) {
  for (const NodeState& n : c.nodes) SPARK_RETURN_IF_ERROR(RefreshNode(runner, n));
  return Status::Ok();
}

}  // namespace

Result<Fault> ParseFault(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const KindInfo& k : kKinds) names.push_back(k.name);
  if (args.empty()) return InvalidArgumentError("which fault? one of: " + Join(names, ", "));
  auto it = std::find_if(kKinds.begin(), kKinds.end(),
                         [&](const KindInfo& k) { return args[0] == k.name; });
  if (it == kKinds.end())
    return InvalidArgumentError("unknown fault '" + args[0] + "'" + DidYouMean(args[0], names) +
                                "; one of: " + Join(names, ", "));
  if (static_cast<int>(args.size()) - 1 != Arity(*it))
    return InvalidArgumentError(std::string("usage: sparkctl sim fault ") + it->name + " " +
                                it->args + "  (" + it->help + ")");
  Fault f;
  f.kind = it->kind;
  if (args.size() > 1) f.node = args[1];
  if (IsFabric(f.kind) && f.kind != FaultKind::kMiscable) {
    SPARK_ASSIGN_OR_RETURN(f.port, ParsePort(args[2]));
  } else if (args.size() > 2) {
    f.value = args[2];
  }
  SPARK_RETURN_IF_ERROR(CheckValue(f));
  return f;
}

std::string FaultUsage() {
  std::string out;
  for (const KindInfo& k : kKinds) {
    std::string head = std::string(k.name) + " " + k.args;
    out += "  " + head + std::string(head.size() < 24 ? 24 - head.size() : 1, ' ') + k.help + "\n";
  }
  return out;
}

Status ApplyFault(Runner& runner, const std::string& cluster_dir, ClusterState& c,
                  const Fault& f) {
  NodeState* node = nullptr;
  if (!f.node.empty()) {
    SPARK_ASSIGN_OR_RETURN(node, c.FindNode(f.node));
  }
  if (f.kind == FaultKind::kClear) {
    SPARK_RETURN_IF_ERROR(ApplyFabric(runner, c, f, nullptr));
    for (NodeState& n : c.nodes)
      SPARK_RETURN_IF_ERROR(ResetNode(runner, cluster_dir, c.default_memlock, n));
    return RefreshAll(runner, c);
  }
  if (IsFabric(f.kind)) {
    SPARK_RETURN_IF_ERROR(ApplyFabric(runner, c, f, node));
    return RefreshAll(runner, c);
  }
  Status s = ApplyNodeFault(runner, cluster_dir, c, *node, f);
  return s.ok() ? s : s.WithContext(node->name);
}

Status RefreshNode(Runner& runner, const NodeState& node) {
  Status s = RunOk(runner, InNode(node, {"/usr/local/bin/sparksim-refresh"}));
  return s.ok() ? s : s.WithContext(node.name + ": refreshing the RDMA tree");
}

}  // namespace spark::sim
