#include "engine/runtime/sampling_params.h"

#include <cmath>

#include "base/strings.h"

namespace spark::engine::runtime {

namespace {

Status Range(const char* name, float value, const char* range) {
  return InvalidArgumentError(std::string("sampling: ") + name + " = " + FormatNumber(value) +
                              " outside " + range);
}

}  // namespace

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return Range("temperature", temperature, "[0, inf)");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Range("top_p", top_p, "(0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Range("min_p", min_p, "[0, 1]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return Range("presence_penalty", presence_penalty, "[-2, 2]");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return Range("frequency_penalty", frequency_penalty, "[-2, 2]");
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return Range("repetition_penalty", repetition_penalty, "(0, inf)");
  }
  if (top_logprobs < 0 || top_logprobs > 20) {
    return Range("top_logprobs", static_cast<float>(top_logprobs), "[0, 20]");
  }
  if (prompt_logprobs < -1 || prompt_logprobs > 20) {
    return Range("prompt_logprobs", static_cast<float>(prompt_logprobs), "[-1, 20]");
  }
  if (max_tokens < (scores_prompt() ? 0 : 1)) {
    return Range("max_tokens", static_cast<float>(max_tokens),
                 scores_prompt() ? "[0, inf)" : "[1, inf) (0 only when scoring the prompt)");
  }
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return InvalidArgumentError("sampling: min_tokens = " + std::to_string(min_tokens) +
                                " outside [0, max_tokens = " + std::to_string(max_tokens) + "]");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || !(bias >= -100.0f && bias <= 100.0f)) {
      return InvalidArgumentError("sampling: logit_bias " + std::to_string(token) + " = " +
                                  FormatNumber(bias) + ": token ids >= 0, biases in [-100, 100]");
    }
  }
  for (const std::string& s : stop) {
    if (s.empty()) return InvalidArgumentError("sampling: stop strings must not be empty");
  }
  return Status::Ok();
}

}  // namespace spark::engine::runtime
