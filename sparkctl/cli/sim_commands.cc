// `sparkctl sim create|destroy|status|exec|fault`: the cluster simulator (docs/simulator.md).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sparkctl/cli/families.h"
#include "sparkctl/sim/node_process.h"
#include "sparkctl/sim/simulator.h"

namespace spark::cli {
namespace {

using nlohmann::ordered_json;

struct SimOptions {
  std::string name = "demo";
  int nodes = 4;
  std::string topology = "ring";
  bool bare_libs = false;
  bool json = false;
  std::string node;
  std::vector<std::string> args;
};

ordered_json PortsJson(const std::set<sim::PortRef>& ports) {
  ordered_json out = ordered_json::array();
  for (const sim::PortRef& p : ports) out.push_back({{"rank", p.rank}, {"port", p.port}});
  return out;
}

ordered_json NodeJson(const std::string& dir, const sim::NodeState& n) {
  bool running = n.holder_pid > 0 && sim::ProcessAlive(n.holder_pid);
  return {{"name", n.name},
          {"rank", n.rank},
          {"namespace", n.netns},
          {"mgmt_address", n.mgmt_address},
          {"running", running},
          {"sshd_running", n.facts.sshd_running},
          {"kernel_release", n.facts.kernel_release},
          {"cma_kib", n.facts.cma_kib},
          {"memlock", n.facts.memlock},
          {"machine_id", n.facts.machine_id},
          {"forward_drop", n.facts.forward_drop},
          {"mem_available_kib", n.facts.mem_available_kib},
          {"machine", n.facts.machine},
          {"glibc", n.facts.glibc},
          {"dir", dir + "/nodes/" + n.name}};
}

ordered_json ClusterJson(const sim::Simulator& simulator, const sim::ClusterState& c) {
  sim::SeedFiles seeds = simulator.Seeds(c.name);
  ordered_json nodes = ordered_json::array();
  for (const sim::NodeState& n : c.nodes) nodes.push_back(NodeJson(simulator.ClusterDir(c.name), n));
  return {{"name", c.name},
          {"topology", sim::TopologyName(c.topology)},
          {"ready", c.ready},
          {"inventory", seeds.inventory},
          {"known_hosts", seeds.known_hosts},
          {"identity_file", seeds.identity},
          {"host_address", c.HostAddress()},
          {"bridge", c.bridge},
          {"wires_namespace", c.wires_netns},
          {"bare_libs", c.bare_libs},
          {"nodes", nodes},
          {"faults",
           {{"unplugged", PortsJson(c.fabric.unplugged)},
            {"swapped", PortsJson(c.fabric.swapped)},
            {"miscabled", c.fabric.miscabled}}}};
}

int RunCreate(const SimOptions& o) {
  Result<sim::Topology> topology = sim::ParseTopology(o.topology);
  if (!topology.ok()) return ReportError(topology.status());
  ProcessRunner runner;
  sim::Simulator simulator(runner);
  auto start = std::chrono::steady_clock::now();
  Result<sim::ClusterState> c =
      simulator.Create({.name = o.name, .nodes = o.nodes, .topology = *topology,
                        .bare_libs = o.bare_libs});
  if (!c.ok()) return ReportError(c.status());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sim::SeedFiles seeds = simulator.Seeds(o.name);
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-sim-create/v1"}, {"seconds", seconds}};
    out["cluster"] = ClusterJson(simulator, *c);
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("created %s: %zu-node %s in %.1f s\n", o.name.c_str(), c->nodes.size(),
              o.topology.c_str(), seconds);
  for (const sim::NodeState& n : c->nodes)
    std::printf("  %-8s %-15s netns %s\n", n.name.c_str(), n.mgmt_address.c_str(), n.netns.c_str());
  std::printf("inventory:   %s\nknown_hosts: %s\n", seeds.inventory.c_str(),
              seeds.known_hosts.c_str());
  std::printf("next:        sparkctl discover -c %s\n", seeds.inventory.c_str());
  return kExitOk;
}

int RunDestroy(const SimOptions& o) {
  ProcessRunner runner;
  sim::Simulator simulator(runner);
  Status s = simulator.Destroy(o.name);
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-sim-destroy/v1"}, {"name", o.name}, {"ok", s.ok()}};
    if (!s.ok()) out["error"] = s.message();
    std::printf("%s\n", out.dump(2).c_str());
    return s.ok() ? kExitOk : kExitFailed;
  }
  if (!s.ok()) return ReportError(s);
  std::printf("destroyed %s\n", o.name.c_str());
  return kExitOk;
}

int RunStatus(const SimOptions& o, bool name_given) {
  ProcessRunner runner;
  sim::Simulator simulator(runner);
  std::vector<std::string> names = name_given ? std::vector<std::string>{o.name} : simulator.List();
  ordered_json clusters = ordered_json::array();
  for (const std::string& name : names) {
    Result<sim::ClusterState> c = simulator.Load(name);
    if (!c.ok()) return ReportError(c.status());
    clusters.push_back(ClusterJson(simulator, *c));
  }
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-sim-status/v1"}, {"clusters", clusters}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  if (clusters.empty()) std::printf("no simulated clusters (create one: sparkctl sim create)\n");
  for (const ordered_json& c : clusters) {
    std::printf("%s  %s%s  inventory %s\n", c["name"].get<std::string>().c_str(),
                c["topology"].get<std::string>().c_str(), c["ready"] ? "" : " (incomplete)",
                c["inventory"].get<std::string>().c_str());
    for (const ordered_json& n : c["nodes"])
      std::printf("  %-8s rank %d  %-14s %-28s %s%s\n", n["name"].get<std::string>().c_str(),
                  n["rank"].get<int>(), n["mgmt_address"].get<std::string>().c_str(),
                  n["namespace"].get<std::string>().c_str(), n["running"] ? "up" : "DOWN",
                  n["sshd_running"] ? "" : " (sshd stopped)");
  }
  return kExitOk;
}

int RunExec(const SimOptions& o) {
  ProcessRunner runner;
  sim::Simulator simulator(runner);
  Result<std::vector<std::string>> argv = simulator.ExecArgv(o.name, o.node, o.args);
  if (!argv.ok()) return ReportError(argv.status());
  Result<int> rc = RunInherited(*argv);
  if (!rc.ok()) return ReportError(rc.status());
  return *rc;
}

int RunFault(const SimOptions& o) {
  Result<sim::Fault> fault = sim::ParseFault(o.args);
  if (!fault.ok()) return ReportError(fault.status());
  ProcessRunner runner;
  sim::Simulator simulator(runner);
  Status s = simulator.InjectFault(o.name, *fault);
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-sim-fault/v1"}, {"name", o.name},
                        {"fault", o.args}, {"ok", s.ok()}};
    if (!s.ok()) out["error"] = s.message();
    std::printf("%s\n", out.dump(2).c_str());
    return s.ok() ? kExitOk : kExitFailed;
  }
  if (!s.ok()) return ReportError(s);
  std::printf("%s: applied %s\n", o.name.c_str(), o.args[0].c_str());
  return kExitOk;
}

CLI::App* AddSub(CLI::App* sim, const char* name, const char* help, SimOptions* o,
                 const std::string& example) {
  CLI::App* cmd = sim->add_subcommand(name, help);
  cmd->add_option("--name", o->name, "Cluster name (default demo)");
  SetExample(cmd, example);
  return cmd;
}

}  // namespace

void RegisterSimCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* sim = parent.add_subcommand(
      "sim", "Simulate a cluster of DGX Sparks with network namespaces (needs root)");
  sim->require_subcommand(1);
  auto o = std::make_shared<SimOptions>();

  CLI::App* create = AddSub(sim, "create", "Create a simulated cluster and print its inventory",
                            o.get(), "sudo sparkctl sim create --nodes 4 --topology ring");
  create->add_option("--nodes", o->nodes, "Number of Sparks, 2..8 (default 4)");
  create->add_option("--topology", o->topology, "pair, ring (default), line or switched");
  create->add_flag("--bare-libs", o->bare_libs,
                   "Nodes do not see the host's build libraries (libssh, yaml-cpp, spdlog, fmt, "
                   "gloo, hiredis, ICU) and have their own /usr/local/lib/sparkctl, like a fresh "
                   "DGX OS: what they run must come from sparkctl's bundle");
  AddJsonFlag(create, &o->json);
  create->callback([o, &context] { context.exit_code = RunCreate(*o); });

  CLI::App* destroy = AddSub(sim, "destroy", "Remove every namespace, link and process of a cluster",
                             o.get(), "sudo sparkctl sim destroy --name demo");
  AddJsonFlag(destroy, &o->json);
  destroy->callback([o, &context] { context.exit_code = RunDestroy(*o); });

  CLI::App* status = AddSub(sim, "status", "List simulated clusters and their nodes", o.get(),
                            "sparkctl sim status --json");
  AddJsonFlag(status, &o->json);
  status->callback([o, status, &context] {
    context.exit_code = RunStatus(*o, status->count("--name") > 0);
  });

  CLI::App* exec = AddSub(sim, "exec", "Run a command inside a node (exit status is the command's)",
                          o.get(), "sudo sparkctl sim exec spark-1 -- ip -br addr");
  exec->add_option("node", o->node, "Node name (spark-1) or rank (1)")->required();
  exec->add_option("command", o->args, "Command and arguments after -- (default: a shell)");
  exec->callback([o, &context] { context.exit_code = RunExec(*o); });

  CLI::App* fault = AddSub(sim, "fault", "Inject or undo a fault", o.get(),
                           "sudo sparkctl sim fault --name demo unplug spark-1 0");
  fault->add_option("fault", o->args, "KIND ARGS...")->required();
  AddJsonFlag(fault, &o->json);
  fault->footer("\nKinds (NODE is a name or rank, PORT 0|1):\n" + sim::FaultUsage() +
                "\nExample:\n  sudo sparkctl sim fault --name demo unplug spark-1 0\n"
                "  sudo sparkctl sim fault --name demo clear");
  fault->callback([o, &context] { context.exit_code = RunFault(*o); });
}

}  // namespace spark::cli
