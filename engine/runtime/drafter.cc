#include "engine/runtime/drafter.h"

#include "engine/runtime/ngram_drafter.h"

namespace spark::engine::runtime {

Status SpeculativeOptions::Validate() const {
  if (method == "none") return Status::Ok();
  if (method == "dspark" || method == "mtp") {
    return UnimplementedError(
        "speculative method '" + method +
        "' is not implemented yet (the DeepSeek-V4.1 draft layers, mtp.*, are not run); use "
        "method ngram (prompt lookup, every model) or none");
  }
  if (method != "ngram") {
    return InvalidArgumentError("speculative method '" + method +
                                "' is not one of none, ngram (dspark is not implemented yet)");
  }
  if (num_speculative_tokens < 1 || num_speculative_tokens > 16) {
    return InvalidArgumentError("num_speculative_tokens " +
                                std::to_string(num_speculative_tokens) +
                                " out of range: ngram needs 1..16 draft tokens a step");
  }
  if (prompt_lookup_min < 1) {
    return InvalidArgumentError("prompt_lookup_min " + std::to_string(prompt_lookup_min) +
                                " must be >= 1 (tokens matched)");
  }
  if (prompt_lookup_max < prompt_lookup_min || prompt_lookup_max > 64) {
    return InvalidArgumentError("prompt_lookup_max " + std::to_string(prompt_lookup_max) +
                                " must be in prompt_lookup_min (" +
                                std::to_string(prompt_lookup_min) + ") .. 64");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeOptions& options) {
  SPARK_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return InvalidArgumentError("speculative decoding is off (method none)");
  return std::unique_ptr<Drafter>(
      new NgramDrafter(options.prompt_lookup_min, options.prompt_lookup_max));
}

}  // namespace spark::engine::runtime
