#include "sparkctl/sim/simulator.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/strings.h"
#include "sparkctl/sim/network.h"
#include "sparkctl/sim/node_image.h"
#include "sparkctl/sim/node_process.h"

namespace spark::sim {
namespace {

namespace fs = std::filesystem;

// Present while /run/netns is a mount point that the simulator's `ip netns add` made.
constexpr char kNetnsMarker[] = "/.netns-mount-made-by-sim";

std::string RandomHex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", static_cast<uint8_t>(in.get()));
  return out;
}

Status KeyGen(Runner& runner, const std::string& path, const std::string& comment) {
  return RunOk(runner, {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path});
}

// First two fields of an OpenSSH public key line: "ssh-ed25519 AAAA...".
Result<std::string> PublicKey(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<std::string> f = Split(Trim(text), ' ', true);
  if (f.size() < 2) return DataLossError(path + " is not an OpenSSH public key");
  return f[0] + " " + f[1];
}

std::string InventoryYaml(const ClusterState& c, const SeedFiles& seeds) {
  std::string out = fmt::format(
      "# Seed inventory of simulated cluster '{0}' ({1} nodes, {2}), written by sparkctl sim.\n"
      "# Hosts and SSH settings only: `sparkctl discover` finds the cabling.\n"
      "schema: sparkctl-cluster/v1\nname: {0}\nssh:\n  user: root\n  port: 22\n"
      "  identity_file: {3}\n  known_hosts: {4}\nnodes:\n",
      c.name, c.nodes.size(), TopologyName(c.topology), seeds.identity, seeds.known_hosts);
  for (const NodeState& n : c.nodes)
    out += fmt::format("  - name: {}\n    address: {}\n", n.name, n.mgmt_address);
  out += "control_plane:\n  cidr: 198.19.255.0/28\n  port: 51871\n";
  return out;
}

}  // namespace

Simulator::Simulator(Runner& runner, std::string root) : runner_(runner), root_(std::move(root)) {}

SeedFiles Simulator::Seeds(const std::string& name) const {
  std::string dir = ClusterDir(name);
  return {dir + "/cluster.yaml", dir + "/known_hosts", dir + "/id_ed25519"};
}

Result<ClusterState> Simulator::Load(const std::string& name) const {
  return LoadState(root_, name);
}

std::vector<std::string> Simulator::List() const { return ListClusters(root_); }

Result<int> Simulator::FreeSlot() const {
  std::set<int> used;
  for (const std::string& name : List())
    if (Result<ClusterState> c = Load(name); c.ok()) used.insert(c->slot);
  for (int slot = 0; slot < 255; ++slot)
    if (!used.contains(slot) && !fs::exists("/sys/class/net/sim" + std::to_string(slot) + "-mgmt"))
      return slot;
  return ResourceExhaustedError("all 255 management subnets 198.19.0-254.0/24 are in use; "
                                "destroy a simulated cluster first");
}

Result<ClusterState> Simulator::Create(const CreateOptions& o) {
  if (geteuid() != 0)
    return FailedPreconditionError("sparkctl sim creates network namespaces and needs root; "
                                   "run it with sudo");
  SPARK_RETURN_IF_ERROR(ValidateClusterName(o.name));
  SPARK_RETURN_IF_ERROR(ValidateNodeCount(o.topology, o.nodes));
  if (Result<ClusterState> old = Load(o.name); old.ok())
    return AlreadyExistsError(fmt::format(
        "simulated cluster '{}' already exists ({} nodes, {}; inventory {}); use it, or run "
        "`sparkctl sim destroy --name {}` first",
        o.name, old->nodes.size(), TopologyName(old->topology), Seeds(o.name).inventory, o.name));
  std::error_code ec;
  fs::remove_all(ClusterDir(o.name), ec);  // without state.json nothing in it is live
  SPARK_ASSIGN_OR_RETURN(int slot, FreeSlot());
  ClusterState c = PlanCluster(o.name, o.topology, o.nodes, slot);
  c.bare_libs = o.bare_libs;
  std::vector<std::string> taken = ListNetns(runner_);
  for (const std::string& ns : taken)
    if (ns.starts_with("sparksim-" + o.name + "-"))
      return FailedPreconditionError("network namespace " + ns + " already exists but cluster '" +
                                     o.name + "' has no state; remove it with `ip netns del " +
                                     ns + "`");
  for (NodeState& n : c.nodes) n.default_machine_id = n.facts.machine_id = RandomHex(16);
  fs::create_directories(ClusterDir(o.name), ec);
  if (ec) return InternalError("cannot create " + ClusterDir(o.name) + ": " + ec.message());
  SPARK_RETURN_IF_ERROR(SaveState(root_, c));
  Status s = Build(c);
  if (s.ok()) return c;
  Status cleanup = Destroy(o.name);
  if (!cleanup.ok()) Logger("sim")->error("cleanup after failed create: {}", cleanup.ToString());
  return s.WithContext("sim create " + o.name);
}

Status Simulator::Build(ClusterState& c) {
  const std::string dir = ClusterDir(c.name);
  SPARK_RETURN_IF_ERROR(KeyGen(runner_, dir + "/id_ed25519", "sparkctl-sim@" + c.name));
  SPARK_ASSIGN_OR_RETURN(std::string controller_key, PublicKey(dir + "/id_ed25519.pub"));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/authorized_keys", controller_key + "\n", 0600));
  // Marked before `ip netns add` can make /run/netns a mount point, so a crash cannot leak it.
  if (!fs::exists("/run/netns")) SPARK_RETURN_IF_ERROR(WriteFileAtomic(root_ + kNetnsMarker, ""));
  SPARK_RETURN_IF_ERROR(CreateNetwork(runner_, c));
  SPARK_RETURN_IF_ERROR(SaveState(root_, c));
  // Nodes are independent: set them up in parallel (ssh-keygen, files, holder, sshd).
  std::vector<Status> results(c.nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < c.nodes.size(); ++i)
    threads.emplace_back([&, i] { results[i] = SetUpNode(c, c.nodes[i]); });
  for (std::thread& t : threads) t.join();
  Status saved = SaveState(root_, c);  // holder pids, even when a node failed
  for (const Status& s : results) SPARK_RETURN_IF_ERROR(s);
  SPARK_RETURN_IF_ERROR(saved);
  SPARK_RETURN_IF_ERROR(WriteSeeds(c));
  c.ready = true;
  return SaveState(root_, c);
}

Status Simulator::SetUpNode(const ClusterState& c, NodeState& node) {
  const std::string dir = ClusterDir(c.name);
  const std::string node_dir = NodeDir(dir, node);
  Status s = WriteNodeImage(dir, c, node);
  if (s.ok()) s = KeyGen(runner_, node_dir + "/ssh/ssh_host_ed25519_key", "root@" + node.name);
  if (s.ok()) s = RunIpBatch(runner_, node.netns, NodeBatch(c, node));
  if (s.ok()) {
    Result<int> pid = StartHolder(node.netns, node_dir + "/setup.sh", node_dir + "/log/setup.log");
    if (pid.ok()) node.holder_pid = *pid;
    s = pid.status();
    if (pid.ok()) s = StartSshd(runner_, dir, node);
  }
  return s.ok() ? s : s.WithContext(node.name);
}

Status Simulator::WriteSeeds(const ClusterState& c) {
  const SeedFiles seeds = Seeds(c.name);
  std::string known_hosts;
  for (const NodeState& n : c.nodes) {
    SPARK_ASSIGN_OR_RETURN(std::string key,
                           PublicKey(NodeDir(ClusterDir(c.name), n) + "/ssh/ssh_host_ed25519_key.pub"));
    known_hosts += n.mgmt_address + "," + n.name + " " + key + "\n";
  }
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(seeds.known_hosts, known_hosts));
  return WriteFileAtomic(seeds.inventory, InventoryYaml(c, seeds));
}

Status Simulator::Destroy(const std::string& name) {
  SPARK_RETURN_IF_ERROR(ValidateClusterName(name));
  const std::string dir = ClusterDir(name);
  Result<ClusterState> c = Load(name);
  std::error_code ec;
  if (!c.ok()) {
    if (c.status().code() != StatusCode::kNotFound || !fs::exists(dir)) return c.status();
    fs::remove_all(dir, ec);  // a create that crashed before writing state made nothing else
    return Status::Ok();
  }
  for (const NodeState& n : c->nodes) SPARK_RETURN_IF_ERROR(KillNetnsProcesses(runner_, n.netns));
  bool ours = c->made_netns_mount || fs::exists(root_ + kNetnsMarker);
  SPARK_RETURN_IF_ERROR(DeleteNetwork(runner_, *c, ours));
  if (!fs::exists("/run/netns")) fs::remove(root_ + kNetnsMarker, ec);
  fs::remove_all(dir, ec);
  if (ec) return InternalError("cannot remove " + dir + ": " + ec.message());
  if (fs::is_empty(root_, ec)) fs::remove(root_, ec);
  return Status::Ok();
}

Result<std::vector<std::string>> Simulator::ExecArgv(const std::string& name,
                                                     const std::string& node,
                                                     const std::vector<std::string>& command) const {
  SPARK_ASSIGN_OR_RETURN(ClusterState c, Load(name));
  SPARK_ASSIGN_OR_RETURN(NodeState * n, c.FindNode(node));
  if (n->holder_pid <= 0 || !ProcessAlive(n->holder_pid))
    return UnavailableError(n->name + " of cluster '" + name + "' is not running (its namespace " +
                            "holder is gone); run `sparkctl sim destroy --name " + name +
                            "` and create it again");
  std::vector<std::string> cmd = command;
  if (cmd.empty()) cmd = {"/bin/bash", "-l"};
  return InNode(*n, cmd);
}

Status Simulator::InjectFault(const std::string& name, const Fault& fault) {
  SPARK_ASSIGN_OR_RETURN(ClusterState c, Load(name));
  Status s = ApplyFault(runner_, ClusterDir(name), c, fault);
  Status saved = SaveState(root_, c);
  SPARK_RETURN_IF_ERROR(s);
  return saved;
}

}  // namespace spark::sim
