// `sparkctl discover`: find the nodes' identities and how they are cabled, write cluster.yaml.
#include <cstdio>
#include <memory>

#include "base/strings.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cabling.h"
#include "sparkctl/inventory/cluster_yaml.h"

namespace spark::cli {
namespace {

struct DiscoverOptions {
  std::string seed;  // -c
  std::string hosts;
  std::string user = "root";
  std::string identity_file;
  std::string known_hosts;
  std::string out;
  bool accept_new = false;
  bool json = false;
  int beacon_ms = 3000;
};

Result<netplan::ClusterSpec> SeedFrom(const DiscoverOptions& o) {
  if (!o.seed.empty()) return inventory::LoadClusterFile(o.seed);
  if (o.hosts.empty()) {
    return InvalidArgumentError("give the nodes: -c SEED.yaml or --hosts A,B,... (see --help)");
  }
  netplan::ClusterSpec spec;
  spec.name = "cluster";
  spec.ssh.user = o.user;
  spec.ssh.identity_file = o.identity_file;
  spec.ssh.known_hosts = o.known_hosts;
  for (const std::string& host : Split(o.hosts, ',', true)) {
    spec.nodes.push_back({host, host, "", std::nullopt, {}});
  }
  return spec;
}

void PrintHuman(const netplan::ClusterSpec& spec, const std::vector<host::NodeObservation>& facts,
                const inventory::CablingResult& cabling) {
  std::printf("%-12s %-15s %-4s %-22s %-18s %-18s %s\n", "NODE", "ADDRESS", "RANK", "KERNEL", "P0",
              "P1", "PLATFORM");
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const auto& n = spec.nodes[i];
    auto peer = [&](size_t p) {
      return p < n.ports.size() && n.ports[p].peer ? n.ports[p].peer->node + " " + n.ports[p].peer->port : std::string("-");
    };
    std::printf("%-12s %-15s %-4s %-22s %-18s %-18s %s\n", n.name.c_str(), n.address.c_str(),
                n.rank ? std::to_string(*n.rank).c_str() : "-",
                facts[i].facts.ok() ? facts[i].facts->kernel.c_str() : "unreachable", peer(0).c_str(),
                peer(1).c_str(),
                facts[i].facts.ok() ? facts[i].facts->platform.Describe().c_str() : "-");
  }
  std::printf("\ntopology: %s\n", inventory::DescribeTopology(cabling).c_str());
  for (const auto& f : facts) {
    if (!f.facts.ok()) std::printf("problem: %s\n", f.facts.status().message().c_str());
  }
  for (const auto& p : cabling.problems) std::printf("problem: %s\n", p.message.c_str());
}

int RunDiscover(const DiscoverOptions& o) {
  auto seed = SeedFrom(o);
  if (!seed.ok()) return ReportError(seed.status());
  netplan::ClusterSpec spec = *seed;
  auto transport = host::MakeTransport(spec, {.accept_new = o.accept_new});
  if (!transport.ok()) return ReportError(transport.status());
  std::vector<host::NodeProbe> probes =
      host::CollectProbes(**transport, spec, "/", std::chrono::milliseconds(o.beacon_ms));
  std::vector<host::NodeObservation> facts;
  for (const auto& p : probes) facts.push_back(p.observation);
  bool reachable = true;
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!facts[i].facts.ok()) {
      reachable = false;
      continue;
    }
    spec.nodes[i].machine_id = facts[i].facts->machine_id;
  }
  inventory::CablingResult cabling;
  if (reachable) {
    std::vector<host::BeaconReport> reports;
    for (auto& p : probes) {
      if (!p.beacons.ok()) return ReportError(p.beacons.status());
      reports.push_back(*p.beacons);
    }
    cabling = inventory::InferCabling(host::NodeNames(spec), reports);
    inventory::ApplyCabling(cabling, &spec);
  }
  std::string out = !o.out.empty() ? o.out : (!o.seed.empty() ? o.seed : "cluster.yaml");
  FieldErrors errors;
  netplan::Validate(spec, &errors);
  bool write = reachable && errors.empty();
  if (write) {
    Status s = inventory::WriteClusterFile(spec, out);
    if (!s.ok()) return ReportError(s);
  }
  if (o.json) {
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& f : facts) {
      if (!f.facts.ok()) problems.push_back({{"node", f.name}, {"message", f.facts.status().message()}});
    }
    for (const auto& p : cabling.problems) problems.push_back({{"node", p.node}, {"message", p.message}});
    nlohmann::ordered_json j = {{"schema", "sparkctl-discover/v1"},
                                {"ok", write && cabling.ok()},
                                {"written", write ? out : ""},
                                {"topology", inventory::DescribeTopology(cabling)},
                                {"cluster", inventory::ToJson(spec)},
                                {"problems", problems}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintHuman(spec, facts, cabling);
    if (!errors.empty()) std::printf("%s\n", errors.ToStatus("inventory").message().c_str());
    std::printf(write ? "\nwrote %s\n" : "\nnot written: %s (fix the problems above)\n", out.c_str());
  }
  return write && cabling.ok() ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterDiscoverCommands(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<DiscoverOptions>();
  CLI::App* d = parent.add_subcommand(
      "discover", "Find every node's identity and cabling (topology, ring order, rank 0); write cluster.yaml");
  AddClusterFlag(d, &o->seed, "Seed inventory (hosts and SSH settings only is enough)");
  d->add_option("--hosts", o->hosts, "Comma-separated management addresses, instead of -c");
  d->add_option("--user", o->user, "SSH user with --hosts (default root)");
  d->add_option("--identity-file", o->identity_file, "SSH private key with --hosts");
  d->add_option("--known-hosts", o->known_hosts, "known_hosts file with --hosts");
  d->add_option("--out", o->out, "Where to write the inventory (default: the -c file, else ./cluster.yaml)");
  d->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact (never changed ones)");
  d->add_option("--beacon-ms", o->beacon_ms, "Longest beacon window; nodes stop earlier once every link heard its peer (default 3000)")
      ->check(CLI::Range(200, 30000));
  AddJsonFlag(d, &o->json, "schema sparkctl-discover/v1");
  SetExample(d, "sparkctl discover -c /run/sparkctl-sim/demo/cluster.yaml");
  d->callback([o, &context] { context.exit_code = RunDiscover(*o); });
}

}  // namespace spark::cli
