// OpenAI's Responses API (POST /v1/responses), stateless: nothing is stored, so
// previous_response_id and the other stored-state fields are refused by name. A request is
// checked field by field and translated into a chat-completions body that openai_request.cc
// reads (one request layer for sampling, function tools, forced calls, structured output and
// reasoning); the response side is a ResponseShape writing the response object and its stream
// events. docs/server.md lists every field with its status.
// Thread-safety: pure functions over values; a shape belongs to one request.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/server/openai_request.h"
#include "engine/server/response_shape.h"

namespace spark::engine::server {

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;  // The equivalent /v1/chat/completions body.
  // The request's settings as the response object echoes them (instructions, tools, text, ...).
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
};

// Reads a /v1/responses body. On failure the 400 naming the field.
std::optional<ApiError> TranslateResponsesRequest(std::string_view body, ResponsesRequest* out);

// A parameter name of the translated body as the Responses request calls it ("max_tokens" ->
// "max_output_tokens", "response_format" -> "text.format"), for errors found after translation.
std::string ResponsesParam(const std::string& chat_param);

// The shape of one /v1/responses response for the served model `model`.
std::shared_ptr<ResponseShape> MakeResponsesShape(std::string model, nlohmann::ordered_json echo);

}  // namespace spark::engine::server
