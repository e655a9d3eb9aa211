// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens), the API coding
// agents such as Claude Code speak. A request is checked field by field and translated into an
// OpenAI chat-completions body, which openai_request.cc then reads like any other: one request
// layer for sampling, tools, forced calls (the grammar machinery) and thinking. The response
// side is a ResponseShape that writes Anthropic's message object, its stream events and its
// error body. Whatever the translation cannot carry (images, documents, server tools, ...) is a
// 400 naming the field; docs/server.md lists every field with its status.
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

struct MessagesRequest {
  nlohmann::ordered_json chat_body;  // The equivalent /v1/chat/completions body.
  bool thinking = false;             // thinking.type "enabled".
};

// Reads a /v1/messages body (count_tokens: a /v1/messages/count_tokens body, which has no
// max_tokens, stream or sampling fields). On failure the 400 naming the field.
std::optional<ApiError> TranslateMessagesRequest(std::string_view body, bool count_tokens,
                                                 MessagesRequest* out);

// A parameter name of the translated body as the Anthropic request calls it ("stop" ->
// "stop_sequences"), for errors found after translation.
std::string AnthropicParam(const std::string& chat_param);

// {"type": "error", "error": {"type": ..., "message": ...}} with the error type Anthropic uses
// for the HTTP status (invalid_request_error, authentication_error, ...).
std::string AnthropicErrorJson(const ApiError& e);
HttpResponse AnthropicErrorResponse(const ApiError& e);

// The shape of one /v1/messages response for the served model `model`.
std::shared_ptr<ResponseShape> MakeMessagesShape(std::string model);

}  // namespace spark::engine::server
