// Chat formats: turn an OpenAI-style conversation into the prompt text a model was trained on,
// byte for byte what the model's tokenizer_config.json Jinja template renders with
// add_generation_prompt=True. Implemented directly in C++ per family (no Jinja interpreter):
//   deepseek_v3  the DeepSeek-V3 template (tools are not rendered by it; no thinking switch)
//   deepseek_v4  "V4 style": the DeepSeek special tokens with a tools section and a
//                <think>/</think> thinking switch (kwarg `thinking` or `enable_thinking`)
//   qwen3        ChatML with <tools>, <tool_call>, <tool_response> and `enable_thinking`
// docs/tokenizer.md describes each format and how one is chosen from the tokenizer config.
// Thread-safety: formats are immutable; Render may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::tokenizer {

struct ToolCall {
  std::string id;
  std::string type = "function";
  std::string name;
  // A JSON string (OpenAI's form, rendered as is) or a JSON object.
  nlohmann::ordered_json arguments = "{}";
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::optional<std::string> content;  // null for an assistant turn that only calls tools
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // OpenAI tool objects
  // chat_template_kwargs, e.g. {"enable_thinking": false} or {"thinking": true}.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
};

// Reads an OpenAI chat-completions body: messages (content as a string or a list of text
// parts), tools, chat_template_kwargs. Returns InvalidArgument naming the offending key
// ("messages[2].role: ...").
Result<ChatRequest> ParseChatRequest(const nlohmann::ordered_json& body);

// Strings a server needs to stop generation and parse the output of a format.
struct ChatMarkers {
  std::vector<std::string> stop_tokens;  // end of an assistant turn
  std::string think_begin;
  std::string think_end;
  std::string tool_calls_begin;  // empty where the format has none
  std::string tool_calls_end;
  std::string tool_call_begin;
  std::string tool_call_end;
  std::string tool_sep;
};

// What forces a tool call without constrained decoding: text appended to the rendered prompt
// (after the generation prompt) so that the model's reply continues a call already begun.
// `prompt_suffix` closes what the generation prompt opened (an empty think block: a forced call
// skips reasoning); `markup` is the start of the call markup, and of the function name for a
// named call, which the output parser must see before the model's text.
struct ToolCallPrefill {
  std::string prompt_suffix;
  std::string markup;
  // What a grammar that writes the rest of the call needs: the text between a function's name
  // and its arguments (for a call of any tool, whose name the grammar writes after `markup`),
  // the text after the arguments, and the markup that closes the call, which the server hands
  // to the output parser once the grammar is complete (the model then stops at once).
  std::string name_suffix;
  std::string arguments_suffix;
  std::string closing;
};

class ChatFormat {
 public:
  virtual ~ChatFormat() = default;

  // "deepseek_v3", "deepseek_v4" or "qwen3".
  virtual std::string_view name() const = 0;

  // The prompt, ending with the generation prompt when request.add_generation_prompt.
  // Returns InvalidArgument for conversations the format cannot express (unknown role, ...).
  virtual Result<std::string> Render(const ChatRequest& request) const = 0;

  virtual const ChatMarkers& markers() const = 0;

  // The prefill for a call of `function` (empty: any of the request's tools), for a request
  // rendered with add_generation_prompt.
  virtual ToolCallPrefill ForcedToolCall(const ChatRequest& request,
                                         std::string_view function) const = 0;
};

// The formats this build has, in a fixed order: "deepseek_v3", "deepseek_v4", "qwen3".
std::span<const std::string_view> ChatFormatNames();

// A format by name; bos_token is used by the DeepSeek formats. Returns InvalidArgument listing
// the known names.
Result<std::unique_ptr<ChatFormat>> MakeChatFormat(std::string_view name, std::string bos_token);

// The format a tokenizer_config.json chat_template belongs to (see docs/tokenizer.md).
// Returns NotFound when the template is empty or of an unknown family.
Result<std::string> DetectChatFormat(std::string_view chat_template);

}  // namespace spark::tokenizer
