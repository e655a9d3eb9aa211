// `sparkctl plan -p PROFILE [-c CLUSTER] [what-if flags]`: the memory a profile needs on each
// node, item by item, and the context x concurrency that fits, from the engine's own accounting
// (`spark-engine plan`, sparkctl/profile/memory_plan.h). With -c, each node's real MemAvailable.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sparkctl/cli/families.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/memory_plan.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/up/node_memory.h"

namespace spark::cli {
namespace {

constexpr char kSchema[] = "sparkctl-plan/v1";

struct PlanCliOptions {
  std::string profile_file;
  std::string cluster_file = "cluster.yaml";
  bool cluster_given = false;
  bool accept_new = false;
  std::string model_dir;
  std::string engine;
  bool json = false;
  int64_t context = 0, kv_tokens = 0;
  int concurrency = 0, tp = 0;
  std::string kv_dtype;
};

profile::WhatIf MakeWhatIf(const PlanCliOptions& o) {
  profile::WhatIf w;
  if (o.context > 0) w.context = o.context;
  if (o.concurrency > 0) w.concurrency = o.concurrency;
  if (!o.kv_dtype.empty()) w.kv_dtype = o.kv_dtype;
  if (o.tp > 0) w.tp = o.tp;
  if (o.kv_tokens > 0) w.kv_tokens = o.kv_tokens;
  return w;
}

int RunPlan(const PlanCliOptions& o) {
  const std::string schema = o.json ? kSchema : "";
  auto prof = profile::LoadProfileFile(o.profile_file);
  if (!prof.ok()) return ReportError(prof.status(), schema);
  if (Status s = profile::ApplyWhatIf(MakeWhatIf(o), &*prof); !s.ok()) {
    return ReportError(s, schema);
  }
  std::unique_ptr<ssh::Transport> transport;
  std::vector<profile::NodeMemory> nodes;
  std::string first_node;
  if (o.cluster_given) {
    auto cluster = inventory::LoadClusterFile(o.cluster_file);
    if (!cluster.ok()) return ReportError(cluster.status(), schema);
    auto t = host::MakeTransport(*cluster, {.accept_new = o.accept_new});
    if (!t.ok()) return ReportError(t.status(), schema);
    transport = std::move(*t);
    const std::vector<std::string> names = host::NodeNames(*cluster);
    auto memory = up::ReadNodeMemory(*transport, names);
    if (!memory.ok()) return ReportError(memory.status(), schema);
    nodes = std::move(*memory);
    if (!names.empty()) first_node = names.front();
  }
  const std::string scratch = std::filesystem::temp_directory_path().string() + "/sparkctl-plan." +
                              std::to_string(getpid());
  auto checkpoint = up::PlanCheckpoint(*prof, o.model_dir, transport.get(), first_node, scratch);
  if (!checkpoint.ok()) return ReportError(checkpoint.status(), schema);
  auto plan = profile::QueryPlan(o.engine.empty() ? DefaultEngineBinary() : o.engine,
                                 profile::PlanArgs(*prof, *checkpoint, nodes));
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!plan.ok()) return ReportError(plan.status(), schema);
  FieldErrors problems;
  profile::ValidateAgainstPlan(*prof, *plan, &problems);
  if (o.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const FieldError& e : problems.errors()) {
      list.push_back({{"key", e.path}, {"message", e.message}});
    }
    nlohmann::ordered_json out = {{"schema", kSchema},     {"ok", problems.empty()},
                                  {"profile", prof->name}, {"nodes_measured", o.cluster_given},
                                  {"problems", list},      {"engine_plan", plan->raw}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", profile::RenderPlan(*prof, *plan).c_str());
    if (!o.cluster_given) {
      std::printf(
          "\n(nodes: one DGX Spark's usable memory; -c CLUSTER fits each node's real "
          "MemAvailable)\n");
    }
  }
  return problems.empty() ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterPlanCommands(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<PlanCliOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "plan", "The memory a profile needs per node, and the context x concurrency that fits");
  cmd->add_option("-p,--profile", o->profile_file, "Profile (YAML)")->required();
  CLI::Option* cluster =
      AddClusterFlag(cmd, &o->cluster_file,
                     "Cluster inventory: fit each node's real MemAvailable (read over SSH)");
  cmd->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  cmd->add_option("--model-dir", o->model_dir,
                  "A local copy of the checkpoint, a folder with its config.json, or that file; "
                  "default "
                  "model.path when this machine has it, else read from the first node with -c");
  cmd->add_option("--engine", o->engine,
                  "spark-engine that makes the plan (default: the one beside sparkctl)");
  cmd->add_option("--context", o->context, "What if: engine.context_length");
  cmd->add_option("--concurrency", o->concurrency, "What if: engine.max_running_requests");
  cmd->add_option("--kv-dtype", o->kv_dtype, "What if: engine.kv_cache.dtype");
  cmd->add_option("--tp", o->tp, "What if: engine.tp (one node per rank)");
  cmd->add_option("--kv-tokens", o->kv_tokens, "What if: engine.kv_cache.tokens per rank");
  AddJsonFlag(cmd, &o->json, kSchema);
  SetExample(cmd,
             "sparkctl plan -p profiles/deepseek-v41-flash-tp2-pair.yaml --model-dir "
             "bench/memory/configs/deepseek-v41-flash --context 262144 --concurrency 2\n"
             "  sparkctl plan -p profiles/qwen3-tiny-demo.yaml -c cluster.yaml --json\n"
             "Exit status: 0 when every node keeps engine.memory_guard.startup_floor_gib, 2 "
             "when one does not or on errors.");
  cmd->callback([o, cluster, &context] {
    o->cluster_given = cluster->count() > 0;
    context.exit_code = RunPlan(*o);
  });
}

}  // namespace spark::cli
