// `sparkctl preflight`: every known trap checked on every node, with a fix hint for each.
#include <cstdio>
#include <memory>

#include "sparkctl/cli/families.h"
#include "sparkctl/cli/preflight_report.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cabling.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"

namespace spark::cli {
namespace {

struct PreflightOptions {
  std::string cluster_file = "cluster.yaml";
  std::string profile_file;
  bool json = false;
  bool accept_new = false;
  bool no_cabling = false;
};

// Cabling as the beacons see it, compared with the inventory's record.
std::vector<host::CablingFinding> CheckCabling(const std::vector<Result<host::BeaconReport>>& beacons,
                                               const netplan::ClusterSpec& cluster) {
  std::vector<host::CablingFinding> findings;
  std::vector<host::BeaconReport> reports;
  for (auto& b : beacons) {
    if (!b.ok()) {
      findings.push_back({"", "beacons: " + b.status().message()});
      return findings;
    }
    reports.push_back(*b);
  }
  inventory::CablingResult seen = inventory::InferCabling(host::NodeNames(cluster), reports);
  for (const auto& p : seen.problems) findings.push_back({p.node, p.message});
  netplan::ClusterSpec expected_as_seen = cluster;
  inventory::ApplyCabling(seen, &expected_as_seen);
  for (size_t i = 0; i < cluster.nodes.size(); ++i) {
    const auto& want = cluster.nodes[i];
    const auto& got = expected_as_seen.nodes[i];
    for (const auto& port : want.ports) {
      if (!port.peer) continue;
      const auto& now = got.ports[port.name == "p1"];
      if (!now.peer || now.peer->node != port.peer->node || now.peer->port != port.peer->port) {
        findings.push_back({want.name, want.name + " " + port.name + " should be cabled to " +
                                           port.peer->node + " " + port.peer->port + " (cluster.yaml) but " +
                                           (now.peer ? "is cabled to " + now.peer->node + " " + now.peer->port
                                                     : std::string("hears nothing: the cable is unplugged or dead"))});
      }
    }
  }
  return findings;
}

int RunPreflight(const PreflightOptions& o) {
  auto cluster = inventory::LoadClusterFile(o.cluster_file);
  const std::string schema = o.json ? "sparkctl-preflight/v1" : "";
  if (!cluster.ok()) return ReportError(cluster.status(), schema);
  std::optional<profile::Profile> prof;
  if (!o.profile_file.empty()) {
    auto p = profile::LoadProfileFile(o.profile_file);
    if (!p.ok()) return ReportError(p.status(), schema);
    prof = *p;
  }
  auto transport = host::MakeTransport(*cluster, {.accept_new = o.accept_new});
  if (!transport.ok()) return ReportError(transport.status(), schema);
  host::PreflightInput input;
  input.cluster = &*cluster;
  input.profile = prof ? &*prof : nullptr;
  const std::string disk_path = prof ? prof->model.path : "/";
  if (!o.no_cabling && cluster->nodes.size() > 1) {
    // Facts and beacons in one round trip per node.
    std::vector<host::NodeProbe> probes =
        host::CollectProbes(**transport, *cluster, disk_path, std::chrono::milliseconds(3000));
    std::vector<Result<host::BeaconReport>> beacons;
    for (auto& p : probes) {
      input.nodes.push_back(p.observation);
      beacons.push_back(p.beacons);
    }
    bool all_reachable = std::all_of(input.nodes.begin(), input.nodes.end(),
                                     [](const auto& n) { return n.facts.ok(); });
    if (all_reachable) input.cabling = CheckCabling(beacons, *cluster);
  } else {
    input.nodes = host::CollectFacts(**transport, *cluster, disk_path);
  }
  std::vector<host::CheckResult> results = host::RunChecks(input);
  if (o.json) {
    std::printf("%s\n", host::ToJson(results).dump(2).c_str());
  } else {
    PrintCheckTable(results);
  }
  return host::AnyFailed(results) ? kExitFailed : kExitOk;
}

}  // namespace

void RegisterPreflightCommands(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<PreflightOptions>();
  CLI::App* p = parent.add_subcommand(
      "preflight", "Check every node for the known traps (kernel, CMA, memlock, GID, cabling, ...)");
  AddClusterFlag(p, &o->cluster_file);
  p->add_option("-p,--profile", o->profile_file, "Profile: adds the kernel list, memory and disk needs");
  p->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  p->add_flag("--no-cabling", o->no_cabling, "Skip the link beacons (FABRIC.CABLING)");
  AddJsonFlag(p, &o->json, "schema sparkctl-preflight/v1");
  SetExample(p, "sparkctl preflight -c cluster.yaml -p profiles/qwen3-tiny-demo.yaml");
  p->callback([o, &context] { context.exit_code = RunPreflight(*o); });
}

}  // namespace spark::cli
