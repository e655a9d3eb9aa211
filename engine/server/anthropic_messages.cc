#include "engine/server/anthropic_messages.h"

#include <array>

#include "engine/server/client_api_fields.h"

#include "base/strings.h"

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;
using Error = std::optional<ApiError>;

using client_api::Field;
using client_api::Refuse;

// Top-level fields: where each is allowed (1: messages, 2: count_tokens).
struct TopField {
  std::string_view name;
  unsigned where;
};
constexpr std::array<TopField, 15> kTopFields = {{
    {"context_management", 3},
    {"model", 3},
    {"messages", 3},
    {"system", 3},
    {"tools", 3},
    {"tool_choice", 3},
    {"thinking", 3},
    {"max_tokens", 1},
    {"stream", 1},
    {"stop_sequences", 1},
    {"temperature", 1},
    {"top_p", 1},
    {"top_k", 1},
    {"metadata", 1},
    {"service_tier", 1},
}};

// Fields of Anthropic's API this server does not implement, with the reason.
struct Unsupported {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<Unsupported, 3> kUnsupported = {{
    {"mcp_servers", "remote MCP servers are not implemented; run the MCP client in the agent"},
    {"container", "code execution containers are not implemented"},
    {"output_format",
     "structured outputs on /v1/messages are not implemented; use a forced "
     "tool call (tool_choice {\"type\": \"tool\"}) or /v1/chat/completions"},
}};

Error CheckTopFields(const ordered_json& body, bool count_tokens) {
  const unsigned where = count_tokens ? 2 : 1;
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    bool known = false;
    for (const TopField& f : kTopFields) {
      if (f.name != key) continue;
      if ((f.where & where) == 0) {
        return Refuse(key, "not a parameter of /v1/messages/count_tokens");
      }
      known = true;
    }
    for (const Unsupported& u : kUnsupported) {
      if (u.name == key) return Refuse(key, "not supported: " + std::string(u.why));
    }
    if (!known) {
      return Refuse(key,
                    "not a parameter this server implements, so it is refused rather "
                    "than ignored (docs/server.md lists the parameters); remove it");
    }
  }
  return std::nullopt;
}

// cache_control: the prefix cache reuses any repeated prompt prefix by itself, so the marker
// only has to be well formed.
Error CheckCacheControl(const ordered_json& block, const std::string& at) {
  const ordered_json* cc = Field(block, "cache_control");
  if (cc == nullptr) return std::nullopt;
  const std::string p = at + ".cache_control";
  if (!cc->is_object() || Field(*cc, "type") == nullptr || (*cc)["type"] != "ephemeral") {
    return Refuse(p, "expected {\"type\": \"ephemeral\"} (the only cache type)");
  }
  for (const auto& [key, value] : cc->items()) {
    if (key == "type") continue;
    if (key == "ttl" && (value == "5m" || value == "1h")) continue;
    return Refuse(p + "." + key, "not supported (type, and ttl \"5m\" or \"1h\", are)");
  }
  return std::nullopt;
}

// Checks that `block` has only `keys` (besides type and cache_control).
Error CheckBlockKeys(const ordered_json& block, const std::string& at,
                     std::initializer_list<std::string_view> keys) {
  for (const auto& [key, value] : block.items()) {
    if (key == "type" || key == "cache_control" || value.is_null()) continue;
    if (key == "citations" && value.is_array() && value.empty()) continue;
    bool ok = false;
    for (std::string_view k : keys) ok = ok || k == key;
    if (!ok) return Refuse(at + "." + key, "not supported in a " + block["type"].dump() + " block");
  }
  return CheckCacheControl(block, at);
}

Error BlockType(const ordered_json& block, const std::string& at, std::string* type) {
  if (!block.is_object() || Field(block, "type") == nullptr || !block["type"].is_string()) {
    return Refuse(at + ".type", "expected a content block with a string `type`");
  }
  *type = block["type"].get<std::string>();
  return std::nullopt;
}

Error UnsupportedBlock(const std::string& type, const std::string& at) {
  if (type == "image") {
    return Refuse(at, "image blocks are not supported: this server serves text models");
  }
  if (type == "document") {
    return Refuse(at, "document blocks are not supported; send the text as a text block");
  }
  return Refuse(at, "block type \"" + type +
                        "\" is not supported (text, tool_use, tool_result, "
                        "thinking are)");
}

Error ReadText(const ordered_json& block, const std::string& at, std::string* text) {
  if (Error e = CheckBlockKeys(block, at, {"text"})) return e;
  const ordered_json* t = Field(block, "text");
  if (t == nullptr || !t->is_string()) return Refuse(at + ".text", "expected a string");
  *text = t->get<std::string>();
  return std::nullopt;
}

// A string, or text blocks joined (system prompts, tool results).
Error ReadTextContent(const ordered_json& v, const std::string& at, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return Refuse(at, "expected a string or a list of text blocks");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string bat = at + "[" + std::to_string(i) + "]";
    std::string type, text;
    if (Error e = BlockType(v[i], bat, &type)) return e;
    if (type != "text") return UnsupportedBlock(type, bat);
    if (Error e = ReadText(v[i], bat, &text)) return e;
    if (!out->empty()) out->push_back('\n');
    *out += text;
  }
  return std::nullopt;
}

ordered_json TextPart(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

Error ReadUserTurn(const ordered_json& content, const std::string& at, ordered_json* messages) {
  if (content.is_string()) {
    messages->push_back({{"role", "user"}, {"content", content}});
    return std::nullopt;
  }
  ordered_json parts = ordered_json::array();
  auto flush = [&] {
    if (!parts.empty()) messages->push_back({{"role", "user"}, {"content", parts}});
    parts = ordered_json::array();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bat = at + "[" + std::to_string(i) + "]";
    std::string type;
    if (Error e = BlockType(content[i], bat, &type)) return e;
    if (type == "text") {
      std::string text;
      if (Error e = ReadText(content[i], bat, &text)) return e;
      parts.push_back(TextPart(text));
    } else if (type == "tool_result") {
      const ordered_json& b = content[i];
      if (Error e = CheckBlockKeys(b, bat, {"tool_use_id", "content", "is_error"})) return e;
      const ordered_json* id = Field(b, "tool_use_id");
      if (id == nullptr || !id->is_string()) {
        return Refuse(bat + ".tool_use_id", "expected the id of the tool_use it answers");
      }
      std::string text;
      if (const ordered_json* c = Field(b, "content")) {
        if (Error e = ReadTextContent(*c, bat + ".content", &text)) return e;
      }
      const ordered_json* is_error = Field(b, "is_error");
      if (is_error != nullptr && !is_error->is_boolean()) {
        return Refuse(bat + ".is_error", "expected true or false");
      }
      // A failed tool's text reaches the model marked as an error (the chat formats have no
      // separate error role).
      if (is_error != nullptr && is_error->get<bool>()) text = "Error: " + text;
      flush();
      messages->push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", text}});
    } else {
      return UnsupportedBlock(type, bat);
    }
  }
  flush();
  return std::nullopt;
}

Error ReadAssistantTurn(const ordered_json& content, const std::string& at,
                        ordered_json* messages) {
  ordered_json m = {{"role", "assistant"}};
  if (content.is_string()) {
    m["content"] = content;
    messages->push_back(std::move(m));
    return std::nullopt;
  }
  std::string text, reasoning;
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bat = at + "[" + std::to_string(i) + "]";
    const ordered_json& b = content[i];
    std::string type;
    if (Error e = BlockType(b, bat, &type)) return e;
    if (type == "text") {
      std::string t;
      if (Error e = ReadText(b, bat, &t)) return e;
      text += t;
    } else if (type == "thinking") {
      // The signature is Anthropic's proof that the block is unmodified; this server writes
      // none and so cannot check one: the text goes back to the model as its reasoning.
      if (Error e = CheckBlockKeys(b, bat, {"thinking", "signature"})) return e;
      const ordered_json* t = Field(b, "thinking");
      if (t == nullptr || !t->is_string()) return Refuse(bat + ".thinking", "expected a string");
      reasoning += t->get<std::string>();
    } else if (type == "tool_use") {
      if (Error e = CheckBlockKeys(b, bat, {"id", "name", "input"})) return e;
      const ordered_json* id = Field(b, "id");
      const ordered_json* name = Field(b, "name");
      const ordered_json* input = Field(b, "input");
      if (id == nullptr || !id->is_string()) return Refuse(bat + ".id", "expected a string");
      if (name == nullptr || !name->is_string()) return Refuse(bat + ".name", "expected a string");
      if (input == nullptr || !input->is_object()) {
        return Refuse(bat + ".input", "expected an object (the call's arguments)");
      }
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name}, {"arguments", input->dump()}}}});
    } else if (type == "redacted_thinking") {
      return Refuse(bat,
                    "redacted_thinking blocks are encrypted by Anthropic's servers; this "
                    "server cannot read them (drop the block)");
    } else {
      return UnsupportedBlock(type, bat);
    }
  }
  m["content"] = calls.empty() || !text.empty() ? ordered_json(text) : ordered_json(nullptr);
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  messages->push_back(std::move(m));
  return std::nullopt;
}

Error ReadMessages(const ordered_json& body, ordered_json* messages) {
  const ordered_json* v = Field(body, "messages");
  if (v == nullptr || !v->is_array() || v->empty()) {
    return Refuse("messages", "expected a non-empty list of messages");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const ordered_json& m = (*v)[i];
    if (!m.is_object()) return Refuse(at, "expected an object with role and content");
    for (const auto& [key, _] : m.items()) {
      if (key != "role" && key != "content") return Refuse(at + "." + key, "not a message field");
    }
    const ordered_json* role = Field(m, "role");
    const ordered_json* content = Field(m, "content");
    if (content == nullptr || !(content->is_string() || content->is_array())) {
      return Refuse(at + ".content", "expected a string or a list of content blocks");
    }
    if (role != nullptr && *role == "user") {
      if (Error e = ReadUserTurn(*content, at + ".content", messages)) return e;
    } else if (role != nullptr && *role == "assistant") {
      if (Error e = ReadAssistantTurn(*content, at + ".content", messages)) return e;
    } else {
      return Refuse(at + ".role",
                    "expected \"user\" or \"assistant\" (a system prompt goes in "
                    "the top-level `system`)");
    }
  }
  // Anthropic continues a final assistant turn (a prefill); the chat formats here always start
  // a new turn, which would silently change the meaning.
  if (v->back().value("role", "") == "assistant") {
    return Refuse("messages[" + std::to_string(v->size() - 1) + "]",
                  "a final assistant turn (prefill) is not supported: the reply always starts a "
                  "new assistant turn; end the conversation with a user turn");
  }
  return std::nullopt;
}

Error ReadTools(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "tools");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return Refuse("tools", "expected a list of tools");
  ordered_json tools = ordered_json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ordered_json& t = (*v)[i];
    if (!t.is_object()) return Refuse(at, "expected a tool object");
    if (const ordered_json* type = Field(t, "type"); type != nullptr && *type != "custom") {
      return Refuse(at + ".type", type->dump() +
                                      " is a server tool this server does not "
                                      "implement (only client tools, type \"custom\", are)");
    }
    for (const auto& [key, value] : t.items()) {
      if (key == "type" || key == "name" || key == "description" || key == "input_schema" ||
          key == "cache_control" || value.is_null()) {
        continue;
      }
      return Refuse(at + "." + key,
                    "not a supported tool field (name, description, "
                    "input_schema, cache_control are)");
    }
    if (Error e = CheckCacheControl(t, at)) return e;
    const ordered_json* name = Field(t, "name");
    const ordered_json* schema = Field(t, "input_schema");
    if (name == nullptr || !name->is_string()) return Refuse(at + ".name", "expected a string");
    if (schema == nullptr || !schema->is_object()) {
      return Refuse(at + ".input_schema", "expected a JSON Schema object");
    }
    ordered_json f = {{"name", *name}};
    if (const ordered_json* d = Field(t, "description")) f["description"] = *d;
    f["parameters"] = *schema;
    tools.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  if (!tools.empty()) (*chat)["tools"] = std::move(tools);
  return std::nullopt;
}

Error ReadToolChoice(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "tool_choice");
  if (v == nullptr) return std::nullopt;
  const std::string p = "tool_choice";
  if (!v->is_object() || Field(*v, "type") == nullptr || !(*v)["type"].is_string()) {
    return Refuse(p, "expected {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
  }
  const std::string type = (*v)["type"].get<std::string>();
  for (const auto& [key, value] : v->items()) {
    if (key == "type" || (key == "name" && type == "tool") || value.is_null()) continue;
    if (key == "disable_parallel_tool_use" && value == false) continue;
    if (key == "disable_parallel_tool_use") {
      return Refuse(p + "." + key,
                    "true is not supported: every call the model writes is "
                    "returned (send false or leave it out)");
    }
    return Refuse(p + "." + key, "not a field of tool_choice type \"" + type + "\"");
  }
  if (!chat->contains("tools")) {
    return Refuse(p, "given without `tools`; send the tools the model may call");
  }
  if (type == "auto" || type == "none") {
    (*chat)["tool_choice"] = type;
  } else if (type == "any") {
    (*chat)["tool_choice"] = "required";
  } else if (type == "tool") {
    const ordered_json* name = Field(*v, "name");
    if (name == nullptr || !name->is_string()) {
      return Refuse(p + ".name", "required with type \"tool\": the tool to call");
    }
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return Refuse(p + ".type", "\"" + type + "\" is not one of auto, any, tool, none");
  }
  return std::nullopt;
}

// thinking -> the chat format's thinking switch (chat_template_kwargs), as on/off: Anthropic's
// default is no thinking.
Error ReadThinking(const ordered_json& body, ordered_json* chat, MessagesRequest* out) {
  const ordered_json* v = Field(body, "thinking");
  std::string type = "disabled";
  if (v != nullptr) {
    if (!v->is_object() || Field(*v, "type") == nullptr || !(*v)["type"].is_string()) {
      return Refuse("thinking",
                    "expected {\"type\": \"enabled\", \"budget_tokens\": N} or "
                    "{\"type\": \"disabled\"}");
    }
    type = (*v)["type"].get<std::string>();
    if (type != "enabled" && type != "disabled") {
      return Refuse("thinking.type", "\"" + type + "\" is not supported (enabled, disabled)");
    }
    for (const auto& [key, value] : v->items()) {
      if (key == "type" || (key == "budget_tokens" && type == "enabled")) continue;
      return Refuse("thinking." + key, "not a field of thinking type \"" + type + "\"");
    }
  }
  if (type == "enabled") {
    const ordered_json* budget = Field(*v, "budget_tokens");
    if (budget == nullptr || !budget->is_number_integer() || budget->get<int64_t>() < 1024) {
      return Refuse("thinking.budget_tokens", "expected an integer of at least 1024");
    }
    const ordered_json* max = Field(body, "max_tokens");
    if (max != nullptr && max->is_number_integer() &&
        budget->get<int64_t>() >= max->get<int64_t>()) {
      return Refuse("thinking.budget_tokens", "must be below max_tokens (" + max->dump() + ")");
    }
  }
  out->thinking = type == "enabled";
  // A forced call skips the think block (the prefill closes it), so, as Anthropic does, the two
  // are not combined.
  const ordered_json* choice = Field(body, "tool_choice");
  if (out->thinking && choice != nullptr && choice->is_object() &&
      (choice->value("type", "") == "any" || choice->value("type", "") == "tool")) {
    return Refuse("thinking", "cannot be enabled when tool_choice forces a tool call (type \"" +
                                  choice->value("type", "") + "\"); use auto or disable thinking");
  }
  (*chat)["chat_template_kwargs"] = {{"enable_thinking", out->thinking},
                                     {"thinking", out->thinking}};
  return std::nullopt;
}

Error ReadSampling(const ordered_json& body, ordered_json* chat) {
  if (const ordered_json* t = Field(body, "temperature")) {
    if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 1) {
      return Refuse("temperature", "expected a number in [0, 1]");
    }
    (*chat)["temperature"] = *t;
  }
  if (const ordered_json* p = Field(body, "top_p")) (*chat)["top_p"] = *p;
  if (const ordered_json* k = Field(body, "top_k")) {
    if (!k->is_number_integer() || k->get<int64_t>() < 1) {
      return Refuse("top_k", "expected a positive integer");
    }
    (*chat)["top_k"] = *k;
  }
  if (const ordered_json* s = Field(body, "stop_sequences")) {
    if (!s->is_array()) return Refuse("stop_sequences", "expected a list of strings");
    if (!s->empty()) (*chat)["stop"] = *s;
  }
  if (const ordered_json* s = Field(body, "stream")) (*chat)["stream"] = *s;
  if (const ordered_json* m = Field(body, "metadata")) {
    // user_id is an id for Anthropic's abuse monitoring; this server has none.
    if (!m->is_object()) return Refuse("metadata", "expected an object");
    for (const auto& [key, value] : m->items()) {
      if (key == "user_id" && (value.is_string() || value.is_null())) continue;
      return Refuse("metadata." + key, "not supported (user_id, a string, is)");
    }
  }
  if (const ordered_json* t = Field(body, "service_tier")) {
    if (*t != "auto" && *t != "standard_only") {
      return Refuse("service_tier", t->dump() +
                                        " is not supported; this server has one tier "
                                        "(\"auto\" or \"standard_only\")");
    }
  }
  return std::nullopt;
}

// context_management: clear_thinking edits drop the reasoning of all but the last `keep`
// assistant turns that have some ("all": none dropped; default 1, as Anthropic). Other edits
// (clearing tool results) are not implemented.
Error ApplyContextManagement(const ordered_json& body, ordered_json* messages) {
  const ordered_json* cm = Field(body, "context_management");
  if (cm == nullptr) return std::nullopt;
  if (!cm->is_object()) return Refuse("context_management", "expected an object");
  for (const auto& [key, _] : cm->items()) {
    if (key != "edits") return Refuse("context_management." + key, "not supported (edits is)");
  }
  const ordered_json* edits = Field(*cm, "edits");
  if (edits == nullptr) return std::nullopt;
  if (!edits->is_array()) return Refuse("context_management.edits", "expected a list");
  for (size_t i = 0; i < edits->size(); ++i) {
    const std::string at = "context_management.edits[" + std::to_string(i) + "]";
    const ordered_json& edit = (*edits)[i];
    const ordered_json* type = edit.is_object() ? Field(edit, "type") : nullptr;
    if (type == nullptr || *type != "clear_thinking_20251015") {
      return Refuse(at + ".type", (type ? type->dump() : std::string("none")) +
                                      " is not supported (only clear_thinking_20251015 is; "
                                      "tool results are never cleared by this server)");
    }
    int64_t keep = 1;
    for (const auto& [key, value] : edit.items()) {
      if (key == "type") continue;
      if (key != "keep") return Refuse(at + "." + key, "not supported (keep is)");
      if (value == "all") {
        keep = -1;
      } else if (value.is_object() && value.value("type", "") == "thinking_turns" &&
                 value.contains("value") && value["value"].is_number_integer() &&
                 value["value"].get<int64_t>() >= 0 && value.size() == 2) {
        keep = value["value"].get<int64_t>();
      } else {
        return Refuse(at + ".keep",
                      "expected \"all\" or {\"type\": \"thinking_turns\", \"value\": N}");
      }
    }
    if (keep < 0) continue;
    for (auto m = messages->rbegin(); m != messages->rend(); ++m) {
      if (!m->contains("reasoning_content")) continue;
      if (keep > 0) {
        --keep;
      } else {
        m->erase("reasoning_content");
      }
    }
  }
  return std::nullopt;
}

Error Translate(const ordered_json& body, bool count_tokens, MessagesRequest* out) {
  if (!body.is_object()) return Refuse("body", "expected a JSON object");
  if (Error e = CheckTopFields(body, count_tokens)) return e;
  const ordered_json* model = Field(body, "model");
  if (model == nullptr || !model->is_string()) return Refuse("model", "expected a string");
  ordered_json chat = {{"model", *model}};
  ordered_json messages = ordered_json::array();
  if (const ordered_json* system = Field(body, "system")) {
    std::string text;
    if (system->is_array()) {
      for (size_t i = 0; i < system->size(); ++i) {
        if (Error e = CheckCacheControl((*system)[i], "system[" + std::to_string(i) + "]")) {
          return e;
        }
      }
    }
    if (Error e = ReadTextContent(*system, "system", &text)) return e;
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  if (Error e = ReadMessages(body, &messages)) return e;
  if (Error e = ApplyContextManagement(body, &messages)) return e;
  chat["messages"] = std::move(messages);
  if (!count_tokens) {
    const ordered_json* max = Field(body, "max_tokens");
    if (max == nullptr) return Refuse("max_tokens", "required");
    if (!max->is_number_integer() || max->get<int64_t>() < 1) {
      return Refuse("max_tokens", "expected a positive integer");
    }
    chat["max_tokens"] = *max;
  }
  if (Error e = ReadTools(body, &chat)) return e;
  if (Error e = ReadToolChoice(body, &chat)) return e;
  if (Error e = ReadThinking(body, &chat, out)) return e;
  if (Error e = ReadSampling(body, &chat)) return e;
  out->chat_body = std::move(chat);
  return std::nullopt;
}

const char* AnthropicErrorType(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

}  // namespace

std::optional<ApiError> TranslateMessagesRequest(std::string_view body, bool count_tokens,
                                                 MessagesRequest* out) {
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidRequest("", "request body: not valid JSON");
  try {
    return Translate(j, count_tokens, out);
  } catch (const nlohmann::json::exception& e) {
    return InvalidRequest("", std::string("request body: ") + e.what());
  }
}

std::string AnthropicParam(const std::string& chat_param) {
  if (chat_param == "stop") return "stop_sequences";
  if (chat_param == "chat_template_kwargs") return "thinking";
  return chat_param;
}

std::string AnthropicErrorJson(const ApiError& e) {
  return ordered_json{
      {"type", "error"},
      {"error", {{"type", AnthropicErrorType(e.http_status)}, {"message", e.message}}}}
      .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

HttpResponse AnthropicErrorResponse(const ApiError& e) {
  return {e.http_status, "application/json", {}, AnthropicErrorJson(e)};
}

}  // namespace spark::engine::server
