// The parts of a request body that shape the output beyond sampling: structured output
// (OpenAI's response_format and vLLM's structured_outputs: JSON object, JSON Schema, regex,
// choice, EBNF grammar), logit_bias, min_tokens and reasoning_effort. Each rejection names its
// field, and inside a schema the JSON Pointer (grammar/json_schema_check.h, run at compile time).
// Thread-safety: pure functions over values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "engine/server/openai_request.h"

namespace spark::engine::server {

// response_format / structured_outputs -> r->structured (at most one of them).
std::optional<ApiError> ReadStructuredOutput(const nlohmann::ordered_json& body,
                                             CompletionRequest* r);

// logit_bias ({"token id": bias in [-100, 100]}) and min_tokens -> r->params.
std::optional<ApiError> ReadLogitControls(const nlohmann::ordered_json& body,
                                          CompletionRequest* r);

// reasoning_effort: OpenAI's names (none, minimal, low, medium, high, xhigh), DeepSeek's max,
// or a number on DeepSeek-V4.1's scale 1-100; passed to the chat format as the
// `reasoning_effort` template kwarg (unless chat_template_kwargs sets it), as vLLM does.
std::optional<ApiError> ReadReasoningEffort(const nlohmann::ordered_json& body,
                                            CompletionRequest* r);

}  // namespace spark::engine::server
