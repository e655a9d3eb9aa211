// `sparkctl cluster check|show [-c cluster.yaml] [--json]`: validate and print an inventory.
#include <cstdio>
#include <memory>
#include <string>

#include "sparkctl/cli/families.h"
#include "sparkctl/cli/json_yaml.h"
#include "sparkctl/inventory/cluster_yaml.h"

namespace spark::cli {
namespace {

struct ClusterOptions {
  std::string cluster_file = "cluster.yaml";
  bool json = false;
};

int RunCheck(const ClusterOptions& o) {
  auto spec = inventory::LoadClusterFile(o.cluster_file);
  if (o.json) {
    nlohmann::ordered_json out = {{"schema", "sparkctl-cluster-check/v1"},
                                  {"file", o.cluster_file},
                                  {"ok", spec.ok()}};
    if (!spec.ok()) out["error"] = spec.status().message();
    std::printf("%s\n", out.dump(2).c_str());
    return spec.ok() ? kExitOk : kExitFailed;
  }
  if (!spec.ok()) return ReportError(spec.status());
  std::printf("ok      %s (%s, %zu nodes)\n", o.cluster_file.c_str(), spec->name.c_str(),
              spec->nodes.size());
  return kExitOk;
}

int RunShow(const ClusterOptions& o) {
  auto spec = inventory::LoadClusterFile(o.cluster_file);
  if (!spec.ok()) return ReportError(spec.status());
  nlohmann::ordered_json json = inventory::ToJson(*spec);
  std::printf("%s", o.json ? (json.dump(2) + "\n").c_str() : JsonToYamlText(json).c_str());
  return kExitOk;
}

void AddCommon(CLI::App* cmd, ClusterOptions* o) {
  AddClusterFlag(cmd, &o->cluster_file);
  AddJsonFlag(cmd, &o->json);
}

}  // namespace

void RegisterClusterCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* cluster = parent.add_subcommand("cluster", "Validate and inspect cluster inventories");
  cluster->require_subcommand(1);

  auto check = std::make_shared<ClusterOptions>();
  CLI::App* c = cluster->add_subcommand("check", "Validate cluster.yaml (schema sparkctl-cluster/v1)");
  AddCommon(c, check.get());
  SetExample(c, "sparkctl cluster check -c /run/sparkctl-sim/demo/cluster.yaml");
  c->callback([check, &context] { context.exit_code = RunCheck(*check); });

  auto show = std::make_shared<ClusterOptions>();
  CLI::App* s = cluster->add_subcommand("show", "Print the inventory with defaults filled in");
  AddCommon(s, show.get());
  SetExample(s, "sparkctl cluster show -c cluster.yaml --json");
  s->callback([show, &context] { context.exit_code = RunShow(*show); });
}

}  // namespace spark::cli
