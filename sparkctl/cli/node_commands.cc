// `sparkctl node ...`: the node-side operations the controller runs on each Spark over SSH.
// They print JSON for the controller; a human can run them too.
#include <cstdio>
#include <future>
#include <memory>

#include "sparkctl/cli/families.h"
#include "sparkctl/host/beacon.h"
#include "sparkctl/host/facts_gather.h"
#include "netplan/cluster_spec.h"

namespace spark::cli {
namespace {

struct FactsOptions {
  std::string disk_path = "/";
  bool json = false;
};

int RunFacts(const FactsOptions& o) {
  host::NodeFacts facts = host::GatherFacts({.root = "/", .disk_path = o.disk_path, .run = nullptr});
  nlohmann::json j = host::ToJson(facts);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

struct BeaconOptions {
  int ms = 1500;
  int peers = 0;
  bool json = false;
};

std::vector<std::string> FabricNetdevs() {
  std::vector<std::string> netdevs;
  for (const auto& port : netplan::kPortTwins) {
    for (const auto& twin : port) netdevs.push_back(twin.netdev);
  }
  return netdevs;
}

int RunBeacon(const BeaconOptions& o) {
  host::NodeFacts facts = host::GatherFacts({.root = "/", .disk_path = "/", .run = nullptr});
  auto report = host::RunBeacons({facts.machine_id, facts.hostname}, FabricNetdevs(),
                                 std::chrono::milliseconds(o.ms), o.peers);
  if (!report.ok()) return ReportError(report.status());
  std::printf("%s\n", host::ToJson(*report).dump(o.json ? -1 : 2).c_str());
  return kExitOk;
}

struct ProbeOptions {
  std::string disk_path = "/";
  int beacon_ms = 3000;
  int peers = 0;
  bool json = false;
};

// Facts and beacons in one process: what discover and preflight need from a node in one SSH
// round trip. The beacons start first and run while the facts are gathered, so the beacon
// windows of all nodes overlap as closely as the SSH starts do.
int RunProbe(const ProbeOptions& o) {
  auto beacons = std::async(std::launch::async, [&o] {
    return host::RunBeacons(host::LocalBeaconIdentity(), FabricNetdevs(),
                            std::chrono::milliseconds(o.beacon_ms), o.peers);
  });
  host::NodeFacts facts = host::GatherFacts({.root = "/", .disk_path = o.disk_path, .run = nullptr});
  auto report = beacons.get();
  if (!report.ok()) return ReportError(report.status());
  nlohmann::json j = {{"schema", "sparkctl-node-probe/v1"},
                      {"facts", host::ToJson(facts)},
                      {"beacons", host::ToJson(*report)}};
  std::printf("%s\n", j.dump(o.json ? -1 : 2).c_str());
  return kExitOk;
}

}  // namespace

void RegisterNodeCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* node = parent.add_subcommand(
      "node", "Node-side operations (run on a Spark; the controller calls them over SSH)");
  node->require_subcommand(1);

  auto facts = std::make_shared<FactsOptions>();
  CLI::App* f = node->add_subcommand("facts", "Print this node's facts (kernel, CMA, GPU, RDMA, ...)");
  f->add_option("--disk-path", facts->disk_path, "Where to measure free disk (the model path)");
  AddJsonFlag(f, &facts->json, "schema sparkctl-node-facts/v1");
  SetExample(f, "sparkctl node facts --json --disk-path /var/lib/sparkctl/models");
  f->callback([facts, &context] { context.exit_code = RunFacts(*facts); });

  auto beacon = std::make_shared<BeaconOptions>();
  CLI::App* b = node->add_subcommand(
      "beacon", "Bring the fabric netdevs up and exchange identity beacons on every link");
  b->add_option("--ms", beacon->ms, "How long to send and listen (default 1500)")
      ->check(CLI::Range(100, 60000));
  b->add_option("--peers", beacon->peers,
                "Other nodes in the cluster: stop early once every link heard its peer (0 = "
                "always run --ms)")
      ->check(CLI::Range(0, 4096));
  AddJsonFlag(b, &beacon->json, "schema sparkctl-node-beacon/v1");
  SetExample(b, "sparkctl node beacon --ms 1500   # on every node at the same time");
  b->callback([beacon, &context] { context.exit_code = RunBeacon(*beacon); });

  auto probe = std::make_shared<ProbeOptions>();
  CLI::App* p = node->add_subcommand(
      "probe", "Facts and link beacons in one run (what discover and preflight ask each node)");
  p->add_option("--disk-path", probe->disk_path, "Where to measure free disk (the model path)");
  p->add_option("--beacon-ms", probe->beacon_ms, "Longest beacon window (default 3000; with --peers a healthy cluster stops much earlier)")
      ->check(CLI::Range(100, 60000));
  p->add_option("--peers", probe->peers, "Other nodes in the cluster (enables the early stop)")
      ->check(CLI::Range(0, 4096));
  AddJsonFlag(p, &probe->json, "schema sparkctl-node-probe/v1");
  SetExample(p, "sparkctl node probe --json --peers 3   # on every node at the same time");
  p->callback([probe, &context] { context.exit_code = RunProbe(*probe); });
}

}  // namespace spark::cli
