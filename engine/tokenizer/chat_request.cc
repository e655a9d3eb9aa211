// ParseChatRequest (OpenAI body -> ChatRequest), format detection and the format factory.
#include <algorithm>

#include "engine/tokenizer/chat_formats_internal.h"
#include "engine/tokenizer/py_json.h"

namespace spark::tokenizer {
namespace {

using nlohmann::ordered_json;

Result<std::optional<std::string>> ParseContent(const ordered_json& m, const std::string& where) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (!it->is_array()) return InvalidArgumentError(where + ".content: expected a string or list");
  std::string text;  // text parts joined by newlines
  for (size_t i = 0; i < it->size(); ++i) {
    const ordered_json& part = (*it)[i];
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type == "image_url" || type == "image" || type == "input_image") {
      return InvalidArgumentError(where + ".content[" + std::to_string(i) + "]: \"" + type +
                                  "\" parts are not supported: this engine serves text only "
                                  "(for DeepSeek-V4.1, the text model; its vision tower is not "
                                  "loaded); send text content");
    }
    if (!part.is_object() || type != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return InvalidArgumentError(where + ".content[" + std::to_string(i) +
                                  "]: only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    if (i > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return std::optional<std::string>(std::move(text));
}

Result<ToolCall> ParseToolCall(const ordered_json& c, const std::string& where) {
  if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
    return InvalidArgumentError(where + ": expected {\"type\": \"function\", \"function\": {...}}");
  }
  const ordered_json& f = c["function"];
  if (!f.contains("name") || !f["name"].is_string()) {
    return InvalidArgumentError(where + ".function.name: expected a string");
  }
  ToolCall call;
  call.id = c.value("id", "");
  call.type = c.value("type", "function");
  call.name = f["name"].get<std::string>();
  if (f.contains("arguments") && !f["arguments"].is_null()) call.arguments = f["arguments"];
  return call;
}

Result<ChatMessage> ParseMessage(const ordered_json& m, const std::string& where) {
  if (!m.is_object()) return InvalidArgumentError(where + ": expected an object");
  if (!m.contains("role") || !m["role"].is_string()) {
    return InvalidArgumentError(where + ".role: expected a string");
  }
  ChatMessage msg;
  msg.role = m["role"].get<std::string>();
  if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for system
  static const char* kRoles[] = {"system", "user", "assistant", "tool"};
  if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return msg.role == r; })) {
    return InvalidArgumentError(where + ".role: '" + msg.role +
                                "' is not one of system, user, assistant, tool");
  }
  SPARK_ASSIGN_OR_RETURN(msg.content, ParseContent(m, where));
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (m.contains(key) && m[key].is_string()) msg.reasoning_content = m[key].get<std::string>();
  }
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) return InvalidArgumentError(where + ".tool_calls: expected a list");
    for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
      SPARK_ASSIGN_OR_RETURN(ToolCall call, ParseToolCall(m["tool_calls"][i],
                                                          where + ".tool_calls[" + std::to_string(i) + "]"));
      msg.tool_calls.push_back(std::move(call));
    }
  }
  if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) msg.tool_call_id = m["tool_call_id"];
  if (m.contains("name") && m["name"].is_string()) msg.name = m["name"];
  return msg;
}

}  // namespace

Result<ChatRequest> ParseChatRequest(const ordered_json& body) {
  if (!body.is_object()) return InvalidArgumentError("request: expected a JSON object");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return InvalidArgumentError("messages: expected a non-empty list of messages");
  }
  ChatRequest request;
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    SPARK_ASSIGN_OR_RETURN(ChatMessage msg,
                           ParseMessage(body["messages"][i], "messages[" + std::to_string(i) + "]"));
    request.messages.push_back(std::move(msg));
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return InvalidArgumentError("tools: expected a list");
    request.tools = body["tools"];
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return InvalidArgumentError("chat_template_kwargs: expected an object");
    }
    request.template_kwargs = body["chat_template_kwargs"];
  }
  if (body.contains("add_generation_prompt") && body["add_generation_prompt"].is_boolean()) {
    request.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  return request;
}

namespace {

struct FormatRow {
  std::string_view name;
  std::unique_ptr<ChatFormat> (*make)(std::string bos_token);
};

std::unique_ptr<ChatFormat> MakeQwen3(std::string) { return internal::MakeQwen3Format(); }

// The formats, one row each; ChatFormatNames lists them in this order.
constexpr FormatRow kFormats[] = {
    {"deepseek_v3", internal::MakeDeepSeekV3Format},
    {"deepseek_v4", internal::MakeDeepSeekV4Format},
    {"qwen3", MakeQwen3},
};
constexpr std::string_view kFormatNames[] = {kFormats[0].name, kFormats[1].name,
                                             kFormats[2].name};
static_assert(std::size(kFormatNames) == std::size(kFormats));

std::string FormatList() {
  std::string out;
  for (std::string_view n : kFormatNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace

std::span<const std::string_view> ChatFormatNames() { return kFormatNames; }

Result<std::unique_ptr<ChatFormat>> MakeChatFormat(std::string_view name, std::string bos_token) {
  for (const FormatRow& row : kFormats) {
    if (row.name == name) return row.make(std::move(bos_token));
  }
  return InvalidArgumentError("unknown chat format '" + std::string(name) + "' (known: " +
                              FormatList() + ")");
}

Result<std::string> DetectChatFormat(std::string_view chat_template) {
  if (chat_template.find("<|im_start|>") != std::string_view::npos) return std::string("qwen3");
  if (chat_template.find("<｜User｜>") != std::string_view::npos) {
    // The V3 template has no thinking switch; templates that read `thinking` are V4 style.
    const bool thinking = chat_template.find("thinking") != std::string_view::npos;
    return std::string(thinking ? "deepseek_v4" : "deepseek_v3");
  }
  return NotFoundError((chat_template.empty()
                            ? std::string("tokenizer_config.json has no chat_template")
                            : std::string("chat_template is of no known family")) +
                       "; pass --chat-format (" + FormatList() + ")");
}

namespace internal {

std::string ArgumentsText(const ToolCall& call) {
  return call.arguments.is_string() ? call.arguments.get<std::string>()
                                    : PyJsonDumps(call.arguments);
}

}  // namespace internal
}  // namespace spark::tokenizer
