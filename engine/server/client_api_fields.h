// What the translations of Anthropic's Messages API and OpenAI's Responses API onto the chat
// request share: reading an optional field and refusing one by name.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/server/openai_request.h"

namespace spark::engine::server::client_api {

// The field, or null when it is absent or JSON null.
inline const nlohmann::ordered_json* Field(const nlohmann::ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A 400 naming `param` (the client's own field path) and why.
inline std::optional<ApiError> Refuse(const std::string& param, const std::string& why) {
  return InvalidRequest(param, param + ": " + why);
}

}  // namespace spark::engine::server::client_api
