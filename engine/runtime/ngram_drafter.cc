#include "engine/runtime/ngram_drafter.h"

#include <algorithm>

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

std::vector<int32_t> NgramDrafter::Propose(std::span<const int32_t> tokens, int max_tokens) {
  const int len = static_cast<int>(tokens.size());
  if (max_tokens < 1) return {};
  for (int n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    std::span<const int32_t> suffix = tokens.subspan(len - n);
    // The most recent earlier occurrence followed by max_tokens tokens; failing that, the one
    // followed by the most (the earliest): in a loop the most recent match sits right before
    // the end and would leave a draft of one token.
    int best = -1;
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      best = start;
      if (len - (start + n) >= max_tokens) break;
    }
    if (best < 0) continue;
    const int from = best + n;  // first token after the match (< len)
    const int count = std::min(max_tokens, len - from);
    return {tokens.begin() + from, tokens.begin() + from + count};
  }
  return {};
}

}  // namespace spark::engine::runtime
