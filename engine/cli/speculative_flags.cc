#include "engine/cli/speculative_flags.h"

#include <CLI/CLI.hpp>

#include "engine/model/deepseek_v41/deepseek_v41_config.h"
#include "engine/model/model_family.h"

namespace spark::engine::cli {

void AddSpeculativeFlags(CLI::App* cmd, runtime::SpeculativeOptions* o) {
  cmd->add_option("--speculative-method,--speculative", o->method,
                  "Speculative decoding: none (default), ngram (prompt lookup: drafts copied "
                  "from earlier in the sequence, verified by the model in one step) or dspark "
                  "(DeepSeek-V4.1's own draft layers, mtp.*; every rank loads its shard)");
  cmd->add_option("--num-speculative-tokens", o->num_speculative_tokens,
                  "Draft tokens per sequence and step, 1..16 (needs --speculative-method)");
  cmd->add_option("--prompt-lookup-max", o->prompt_lookup_max,
                  "ngram: longest suffix matched, in tokens (default 4)");
  cmd->add_option("--prompt-lookup-min", o->prompt_lookup_min,
                  "ngram: shortest suffix matched, in tokens (default 1)");
}

Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& o) {
  if (!o.enabled()) {
    if (o.num_speculative_tokens != 0) {
      return InvalidArgumentError("--num-speculative-tokens " +
                                  std::to_string(o.num_speculative_tokens) +
                                  " needs --speculative-method ngram or dspark");
    }
    return Status::Ok();
  }
  Status s = o.Validate();
  if (s.ok()) return s;
  return Status(s.code(), "--speculative-method " + o.method + ": " + s.message());
}

Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& o,
                                const std::string& model_dir) {
  Status s = ValidateSpeculativeFlags(o);
  const bool ask_checkpoint = s.code() == StatusCode::kUnimplemented ||
                              (s.ok() && o.needs_draft_model());
  if (!ask_checkpoint || model_dir.empty()) return s;
  Result<core::ModelConfig> config = model::LoadModelConfig(model_dir);
  if (!config.ok()) return s;
  if (s.ok()) return CheckDsparkLayers(*config);
  return Status(s.code(), s.message() + " (" + model::dsv41::DescribeDspark(*config) + ")");
}

Status CheckDsparkLayers(const core::ModelConfig& config) {
  const std::string has = model::dsv41::DescribeDspark(config);
  if (has.rfind("checkpoint has no ", 0) != 0) return Status::Ok();
  return FailedPreconditionError("--speculative-method dspark: " + has +
                                 "; use method ngram (prompt lookup, every model) or none");
}

std::vector<std::string> SpeculativeArgv(const runtime::SpeculativeOptions& o) {
  if (!o.enabled()) return {};
  if (o.method != "ngram") {
    return {"--speculative-method", o.method, "--num-speculative-tokens",
            std::to_string(o.num_speculative_tokens)};
  }
  return {"--speculative-method", o.method,
          "--num-speculative-tokens", std::to_string(o.num_speculative_tokens),
          "--prompt-lookup-max", std::to_string(o.prompt_lookup_max),
          "--prompt-lookup-min", std::to_string(o.prompt_lookup_min)};
}

}  // namespace spark::engine::cli
