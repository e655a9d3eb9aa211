// Constructors of the chat formats and helpers shared by them (not part of the public API).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/tokenizer/chat_format.h"

namespace spark::tokenizer::internal {

std::unique_ptr<ChatFormat> MakeDeepSeekV3Format(std::string bos_token);
std::unique_ptr<ChatFormat> MakeDeepSeekV4Format(std::string bos_token);
std::unique_ptr<ChatFormat> MakeQwen3Format();

// The content of a message, "" when null.
inline const std::string& ContentOrEmpty(const ChatMessage& m) {
  static const std::string kEmpty;
  return m.content ? *m.content : kEmpty;
}

// True when kwargs[key] is the JSON boolean `value` (Jinja's `is true` / `is false`).
inline bool KwargIs(const nlohmann::ordered_json& kwargs, const char* key, bool value) {
  auto it = kwargs.find(key);
  return it != kwargs.end() && it->is_boolean() && it->get<bool>() == value;
}

// Arguments of a tool call as text: a JSON string as is, anything else as Python's json.dumps.
std::string ArgumentsText(const ToolCall& call);

}  // namespace spark::tokenizer::internal
