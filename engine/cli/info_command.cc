// `spark-engine info [--json]`: what this build supports — its backends, the model families of
// the family table (model types, backends, element types, chat format and parsers) and the chat
// formats. sparkctl's profile checks read the JSON form (schema spark-engine-info/v1).
#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/version.h"
#include "engine/cli/engine_command.h"
#include "engine/config/environment.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/deepseek_v41/deepseek_v41_config.h"
#include "engine/model/model_family.h"
#include "engine/tokenizer/chat_format.h"

namespace spark::engine {
namespace {

template <typename T, typename F>
nlohmann::json List(std::span<const T> items, F name) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items) out.push_back(std::string(name(item)));
  return out;
}

nlohmann::ordered_json Info() {
  const auto str = [](std::string_view s) { return s; };
  const auto dtype = [](backend::DType t) { return backend::DTypeName(t); };
  nlohmann::ordered_json families = nlohmann::ordered_json::array();
  for (const model::ModelFamily* f : model::ModelFamilies()) {
    families.push_back({{"name", std::string(f->name)},
                        {"model_types", List(f->model_types, str)},
                        {"backends", List(f->backends, str)},
                        {"weight_dtypes", List(f->weight_dtypes, dtype)},
                        {"kv_dtypes", List(f->kv_dtypes, dtype)},
                        {"chat_format", std::string(f->chat_format)},
                        {"reasoning_parser", std::string(f->reasoning_parser)},
                        {"tool_parser", std::string(f->tool_parser)}});
  }
  const std::vector<std::string> compiled = backend::CompiledBackends();
  return {{"schema", "spark-engine-info/v1"},
          {"version", kVersion},
          {"backends", compiled},
          {"model_families", families},
          {"chat_formats", List(tokenizer::ChatFormatNames(), str)},
          // Methods `serve --speculative-method` runs, for every model family (dspark is
          // refused: not built yet).
          {"speculative_methods", {"ngram", "dspark"}},
          {"environment",
           {{"variables", List(config::EnvironmentNames(), str)},
            {"prefixes", List(config::LibraryEnvironmentPrefixes(), str)}}}};
}

// What this build makes of one checkpoint (--model DIR): its family, the backends that run it
// and whether --tp ranks divide it (TpShard::CheckFits). Problems are listed, never thrown:
// sparkctl's profile check reports them at the profile's keys.
nlohmann::ordered_json ModelInfo(const std::string& dir, int tp) {
  nlohmann::ordered_json out = {{"dir", dir}, {"tp", tp}};
  nlohmann::ordered_json problems = nlohmann::ordered_json::array();
  Result<core::ModelConfig> config = model::LoadModelConfig(dir);
  if (!config.ok()) {
    problems.push_back({{"key", "model_type"}, {"message", config.status().message()}});
  } else {
    const model::ModelFamily* family = model::FindModelFamily(config->model_type);
    out["model_type"] = config->model_type;
    out["family"] = std::string(family->name);
    out["backends"] = List(family->backends, [](std::string_view s) { return s; });
    if (config->model_type == "deepseek_v41") {
      // The DSpark draft stack the checkpoint declares; not run (runs: false).
      const core::DeepseekV41Settings& s = config->dsv41;
      out["dspark"] = {{"draft_layers", s.num_nextn_predict_layers},
                       {"block_size", s.dspark_block_size},
                       {"noise_token_id", s.dspark_noise_token_id},
                       {"markov_rank", s.dspark_markov_rank},
                       {"n_routed_experts", s.dspark_n_routed_experts},
                       {"num_experts_per_tok", s.dspark_num_experts_per_tok},
                       {"target_layer_ids", s.dspark_target_layer_ids},
                       {"runs", false},
                       {"summary", model::dsv41::DescribeDspark(*config)}};
    }
    if (Status fits = model::TpShard{0, tp}.CheckFits(*config, model::MoeSharding::kInsideExperts);
        !fits.ok()) {
      problems.push_back({{"key", "tp"}, {"message", fits.message()}});
    }
  }
  out["ok"] = problems.empty();
  out["problems"] = problems;
  return out;
}

void PrintTable(const nlohmann::ordered_json& info) {
  std::printf("spark-engine %s, backends: %s\n\n", kVersion,
              info["backends"].dump().c_str());
  std::printf("%-12s %-24s %-16s %-24s %-16s %s\n", "family", "model types", "backends",
              "weights", "kv cache", "chat format / parsers");
  for (const auto& f : info["model_families"]) {
    std::printf("%-12s %-24s %-16s %-24s %-16s %s / %s, %s\n",
                f["name"].get<std::string>().c_str(), f["model_types"].dump().c_str(),
                f["backends"].dump().c_str(), f["weight_dtypes"].dump().c_str(),
                f["kv_dtypes"].dump().c_str(), f["chat_format"].get<std::string>().c_str(),
                f["reasoning_parser"].get<std::string>().c_str(),
                f["tool_parser"].get<std::string>().c_str());
  }
  std::printf("\nchat formats: %s\n", info["chat_formats"].dump().c_str());
}

}  // namespace

void RegisterInfoCommand(CLI::App& parent, CommandContext& context) {
  CLI::App* cmd = parent.add_subcommand(
      "info", "What this build supports: backends, model families, chat formats");
  auto json = std::make_shared<bool>(false);
  auto model_dir = std::make_shared<std::string>();
  auto tp = std::make_shared<int>(1);
  AddJsonFlag(cmd, json.get(), "schema spark-engine-info/v1");
  cmd->add_option("--model", *model_dir,
                  "Also say what this build makes of this checkpoint: its family, backends, "
                  "whether --tp ranks divide it and, for DeepSeek-V4.1, its DSpark draft "
                  "stack (\"model\" in the JSON)");
  cmd->add_option("--tp", *tp, "Tensor-parallel ranks to check --model against (default 1)");
  cmd->footer("\nExamples:\n  spark-engine info --json\n"
              "  spark-engine info --json --model tests/fixtures/models/qwen3-tiny --tp 4");
  cmd->callback([&context, json, model_dir, tp] {
    nlohmann::ordered_json info = Info();
    if (!model_dir->empty()) info["model"] = ModelInfo(*model_dir, std::max(1, *tp));
    if (*json) {
      std::printf("%s\n", info.dump(2).c_str());
    } else {
      PrintTable(info);
      if (info.contains("model")) std::printf("\nmodel: %s\n", info["model"].dump().c_str());
    }
    context.exit_code = kExitOk;
  });
}

}  // namespace spark::engine
