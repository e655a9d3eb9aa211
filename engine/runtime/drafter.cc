#include "engine/runtime/drafter.h"

#include "engine/runtime/model_drafter.h"
#include "engine/runtime/ngram_drafter.h"

namespace spark::engine::runtime {

Status SpeculativeOptions::Validate() const {
  if (method == "none") return Status::Ok();
  if (method == "mtp") {
    return UnimplementedError(
        "speculative method 'mtp' is not implemented (DeepSeek-V4.1's mtp.* layers are DSpark "
        "stages: use method dspark); use dspark, ngram (prompt lookup, every model) or none");
  }
  if (method != "ngram" && method != "dspark") {
    return InvalidArgumentError("speculative method '" + method +
                                "' is not one of none, ngram, dspark");
  }
  if (num_speculative_tokens < 1 || num_speculative_tokens > 16) {
    return InvalidArgumentError("num_speculative_tokens " +
                                std::to_string(num_speculative_tokens) + " out of range: " +
                                method + " needs 1..16 draft tokens a step");
  }
  // The lookup sizes are ngram's; another method given them would ignore them.
  if (method != "ngram" &&
      (prompt_lookup_min != kDefaultLookupMin || prompt_lookup_max != kDefaultLookupMax)) {
    return InvalidArgumentError(std::string(prompt_lookup_max != kDefaultLookupMax
                                                ? "prompt_lookup_max"
                                                : "prompt_lookup_min") +
                                " applies to speculative method ngram only (method is " + method +
                                ")");
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

Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeOptions& options,
                                             ModelRunner* runner) {
  SPARK_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return InvalidArgumentError("speculative decoding is off (method none)");
  if (options.method == "dspark") {
    if (runner == nullptr || !runner->has_draft_model()) {
      return FailedPreconditionError(
          "speculative method dspark needs the checkpoint's DSpark draft stack loaded (a "
          "DeepSeek-V4.1 checkpoint with mtp.* layers); use ngram");
    }
    return std::unique_ptr<Drafter>(new ModelDrafter(runner, options.num_speculative_tokens));
  }
  return std::unique_ptr<Drafter>(
      new NgramDrafter(options.prompt_lookup_min, options.prompt_lookup_max));
}

}  // namespace spark::engine::runtime
