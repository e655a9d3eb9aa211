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
  if (max_tokens < 1) return Range("max_tokens", static_cast<float>(max_tokens), "[1, inf)");
  for (const std::string& s : stop) {
    if (s.empty()) return InvalidArgumentError("sampling: stop strings must not be empty");
  }
  return Status::Ok();
}

}  // namespace spark::engine::runtime
