#include "engine/server/responses_api.h"

#include <array>

#include "engine/server/client_api_fields.h"

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;
using Error = std::optional<ApiError>;

using client_api::Field;
using client_api::Refuse;

// Read below; the ones accepted without effect say why in docs/server.md.
constexpr std::array<std::string_view, 21> kImplemented = {
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "reasoning",
    "store",
    "stream",
    "metadata",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "service_tier",
    "truncation",
    "background",
    "include",
};

// Stored state this server does not keep, and other fields it refuses with a reason.
struct Refused {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<Refused, 5> kRefused = {{
    {"previous_response_id",
     "this server is stateless and stores no responses; send the whole "
     "conversation as `input` items"},
    {"conversation",
     "this server is stateless and stores no conversations; send the whole "
     "conversation as `input` items"},
    {"prompt", "stored prompt templates are not implemented; send `instructions` and `input`"},
    {"max_tool_calls", "not implemented; every call the model writes is returned"},
    {"top_logprobs",
     "log-probabilities are not implemented on /v1/responses; use "
     "/v1/chat/completions"},
}};

Error CheckTopFields(const ordered_json& body) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    for (const Refused& r : kRefused) {
      if (r.name == key) return Refuse(key, "not supported: " + std::string(r.why));
    }
    bool known = false;
    for (std::string_view f : kImplemented) known = known || f == key;
    if (!known) {
      return Refuse(key,
                    "not a parameter this server implements, so it is refused rather "
                    "than ignored (docs/server.md lists the parameters); remove it");
    }
  }
  auto fixed = [&](const char* key, const ordered_json& ok, const char* why) -> Error {
    const ordered_json* v = Field(body, key);
    if (v == nullptr || *v == ok) return std::nullopt;
    return Refuse(key, v->dump() + " is not supported; " + why);
  };
  if (Error e = fixed("parallel_tool_calls", true, "every call the model writes is returned")) {
    return e;
  }
  if (Error e = fixed("background", false, "responses run in the foreground only")) return e;
  if (Error e = fixed("truncation", "disabled",
                      "an input longer than the context is refused, never truncated")) {
    return e;
  }
  if (const ordered_json* v = Field(body, "include"); v != nullptr && *v != ordered_json::array()) {
    return Refuse("include", v->dump() +
                                 " is not supported (no extra output data is "
                                 "implemented; send [] or leave it out)");
  }
  if (const ordered_json* v = Field(body, "service_tier");
      v != nullptr && *v != "auto" && *v != "default") {
    return Refuse("service_tier", v->dump() + " is not supported; this server has one tier");
  }
  if (const ordered_json* v = Field(body, "store"); v != nullptr && !v->is_boolean()) {
    return Refuse("store", "expected true or false");
  }
  if (const ordered_json* v = Field(body, "metadata"); v != nullptr && !v->is_object()) {
    return Refuse("metadata", "expected an object of strings");
  }
  return std::nullopt;
}

// A string, or a list of input_text / output_text parts, as text.
Error ReadText(const ordered_json& content, const std::string& at, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return Refuse(at, "expected a string or a list of content parts");
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string pat = at + "[" + std::to_string(i) + "]";
    const ordered_json& part = content[i];
    const ordered_json* type = part.is_object() ? Field(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) return Refuse(pat + ".type", "expected a string");
    if (*type != "input_text" && *type != "output_text") {
      return Refuse(pat + ".type", type->dump() +
                                       " is not supported (input_text and "
                                       "output_text are; this server serves text models)");
    }
    for (const auto& [key, value] : part.items()) {
      if (key == "type" || key == "text" || value.is_null()) continue;
      if ((key == "annotations" || key == "logprobs") && value == ordered_json::array()) continue;
      return Refuse(pat + "." + key, "not supported in a text part");
    }
    const ordered_json* text = Field(part, "text");
    if (text == nullptr || !text->is_string()) return Refuse(pat + ".text", "expected a string");
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

// Chat messages built from input items; function calls and reasoning join the assistant turn
// they belong to.
class Conversation {
 public:
  ordered_json messages = ordered_json::array();

  Error Add(const ordered_json& item, const std::string& at) {
    if (!item.is_object()) return Refuse(at, "expected an input item object");
    const ordered_json* type = Field(item, "type");
    const std::string t =
        type != nullptr && type->is_string() ? type->get<std::string>() : (type ? "" : "message");
    if (t == "message") return AddMessage(item, at);
    if (t == "function_call") return AddCall(item, at);
    if (t == "function_call_output") return AddOutput(item, at);
    if (t == "reasoning") return AddReasoning(item, at);
    return Refuse(at + ".type", (type ? type->dump() : std::string("?")) +
                                    " is not supported (message, function_call, "
                                    "function_call_output, reasoning are)");
  }

  void Finish() { FlushReasoning(); }

 private:
  Error Keys(const ordered_json& item, const std::string& at,
             std::initializer_list<std::string_view> keys) {
    for (const auto& [key, value] : item.items()) {
      if (key == "type" || key == "id" || key == "status" || value.is_null()) continue;
      bool ok = false;
      for (std::string_view k : keys) ok = ok || k == key;
      if (!ok) return Refuse(at + "." + key, "not supported in this item");
    }
    return std::nullopt;
  }

  Error AddMessage(const ordered_json& item, const std::string& at) {
    if (Error e = Keys(item, at, {"role", "content"})) return e;
    const ordered_json* role = Field(item, "role");
    const ordered_json* content = Field(item, "content");
    if (role == nullptr || !role->is_string()) return Refuse(at + ".role", "expected a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "user" && r != "system" && r != "assistant") {
      return Refuse(at + ".role", "\"" + r +
                                      "\" is not one of user, system, developer, "
                                      "assistant");
    }
    if (content == nullptr) return Refuse(at + ".content", "required");
    std::string text;
    if (Error e = ReadText(*content, at + ".content", &text)) return e;
    if (r == "assistant") {
      ordered_json& m = Assistant();
      m["content"] = m["content"].is_string() ? m["content"].get<std::string>() + text : text;
      return std::nullopt;
    }
    FlushReasoning();
    last_assistant_ = false;
    messages.push_back({{"role", r}, {"content", text}});
    return std::nullopt;
  }

  Error AddCall(const ordered_json& item, const std::string& at) {
    if (Error e = Keys(item, at, {"call_id", "name", "arguments"})) return e;
    for (const char* key : {"call_id", "name", "arguments"}) {
      const ordered_json* v = Field(item, key);
      if (v == nullptr || !v->is_string()) return Refuse(at + "." + key, "expected a string");
    }
    ordered_json& m = Assistant();
    if (!m.contains("tool_calls")) m["tool_calls"] = ordered_json::array();
    m["tool_calls"].push_back(
        {{"id", item["call_id"]},
         {"type", "function"},
         {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    return std::nullopt;
  }

  Error AddOutput(const ordered_json& item, const std::string& at) {
    if (Error e = Keys(item, at, {"call_id", "output"})) return e;
    const ordered_json* id = Field(item, "call_id");
    const ordered_json* output = Field(item, "output");
    if (id == nullptr || !id->is_string()) return Refuse(at + ".call_id", "expected a string");
    if (output == nullptr) return Refuse(at + ".output", "required");
    std::string text;
    if (Error e = ReadText(*output, at + ".output", &text)) return e;
    FlushReasoning();
    last_assistant_ = false;
    messages.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", text}});
    return std::nullopt;
  }

  // The reasoning text goes back to the model with the assistant turn that follows it.
  Error AddReasoning(const ordered_json& item, const std::string& at) {
    if (Error e = Keys(item, at, {"summary", "content"})) return e;
    if (const ordered_json* s = Field(item, "summary");
        s != nullptr && *s != ordered_json::array()) {
      return Refuse(at + ".summary",
                    "reasoning summaries are not implemented; send the "
                    "reasoning as content (reasoning_text parts)");
    }
    if (const ordered_json* c = Field(item, "content")) {
      if (!c->is_array()) return Refuse(at + ".content", "expected a list of reasoning_text");
      for (size_t i = 0; i < c->size(); ++i) {
        const ordered_json& part = (*c)[i];
        const std::string pat = at + ".content[" + std::to_string(i) + "]";
        if (!part.is_object() || Field(part, "type") == nullptr ||
            part["type"] != "reasoning_text" || Field(part, "text") == nullptr ||
            !part["text"].is_string()) {
          return Refuse(pat, "expected {\"type\": \"reasoning_text\", \"text\": ...}");
        }
        pending_reasoning_ += part["text"].get<std::string>();
      }
    }
    if (last_assistant_) FlushReasoning();  // Reasoning after a turn's call: still that turn.
    return std::nullopt;
  }

  ordered_json& Assistant() {
    if (!last_assistant_) {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      last_assistant_ = true;
    }
    ordered_json& m = messages.back();
    if (!pending_reasoning_.empty()) {
      m["reasoning_content"] = std::move(pending_reasoning_);
      pending_reasoning_.clear();
    }
    return m;
  }

  void FlushReasoning() {
    if (pending_reasoning_.empty()) return;
    if (last_assistant_) {
      ordered_json& m = messages.back();
      m["reasoning_content"] =
          (m.contains("reasoning_content") ? m["reasoning_content"].get<std::string>()
                                           : std::string()) +
          pending_reasoning_;
      pending_reasoning_.clear();
    } else {
      Assistant();
    }
  }

  bool last_assistant_ = false;
  std::string pending_reasoning_;
};

Error ReadTools(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "tools");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return Refuse("tools", "expected a list of tools");
  ordered_json tools = ordered_json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ordered_json& t = (*v)[i];
    const ordered_json* type = t.is_object() ? Field(t, "type") : nullptr;
    if (type == nullptr || *type != "function") {
      return Refuse(at + ".type", (type ? type->dump() : std::string("none")) +
                                      " is not supported (only function tools are; hosted "
                                      "tools such as web_search are not implemented)");
    }
    ordered_json f = ordered_json::object();
    for (const auto& [key, value] : t.items()) {
      if (key == "type" || value.is_null()) continue;
      if (key == "name" || key == "description" || key == "parameters") {
        f[key] = value;
      } else if (key == "strict" && value.is_boolean()) {
        // Calls are written under a grammar of the parameters when tool_choice forces them; a
        // call the model writes freely is parsed, not constrained (docs/server.md).
        f[key] = value;
      } else {
        return Refuse(at + "." + key, "not a supported function tool field");
      }
    }
    if (!f.contains("name") || !f["name"].is_string()) {
      return Refuse(at + ".name", "expected a string");
    }
    tools.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  if (!tools.empty()) (*chat)["tools"] = std::move(tools);
  return std::nullopt;
}

Error ReadToolChoice(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "tool_choice");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    (*chat)["tool_choice"] = *v;
    return std::nullopt;
  }
  if (v->is_object() && Field(*v, "type") != nullptr && (*v)["type"] == "function" &&
      Field(*v, "name") != nullptr && (*v)["name"].is_string() && v->size() == 2) {
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*v)["name"]}}}};
    return std::nullopt;
  }
  return Refuse("tool_choice",
                "expected \"auto\", \"none\", \"required\" or "
                "{\"type\": \"function\", \"name\": ...}");
}

// text.format -> response_format (json_schema, json_object or text).
Error ReadTextFormat(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "text");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return Refuse("text", "expected an object");
  for (const auto& [key, value] : v->items()) {
    if (key == "format" || value.is_null()) continue;
    if (key == "verbosity" && value == "medium") continue;
    return Refuse("text." + key, "not supported (format is; verbosity only \"medium\")");
  }
  const ordered_json* f = Field(*v, "format");
  if (f == nullptr) return std::nullopt;
  const ordered_json* type = f->is_object() ? Field(*f, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return Refuse("text.format.type", "expected \"text\", \"json_object\" or \"json_schema\"");
  }
  if (*type == "text" || *type == "json_object") {
    if (f->size() != 1) return Refuse("text.format", "type " + type->dump() + " takes no fields");
    (*chat)["response_format"] = {{"type", *type}};
    return std::nullopt;
  }
  if (*type != "json_schema") {
    return Refuse("text.format.type", type->dump() +
                                          " is not supported (text, json_object, "
                                          "json_schema)");
  }
  ordered_json js = ordered_json::object();
  for (const auto& [key, value] : f->items()) {
    if (key == "type") continue;
    if (key == "name" || key == "schema" || key == "strict" || key == "description") {
      js[key] = value;
    } else {
      return Refuse("text.format." + key, "not a field of a json_schema format");
    }
  }
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  return std::nullopt;
}

Error ReadReasoning(const ordered_json& body, ordered_json* chat) {
  const ordered_json* v = Field(body, "reasoning");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return Refuse("reasoning", "expected an object");
  for (const auto& [key, value] : v->items()) {
    if (value.is_null() || key == "effort") continue;
    if (key == "summary" || key == "generate_summary") {
      return Refuse("reasoning." + key,
                    "reasoning summaries are not implemented (the full "
                    "reasoning comes back as reasoning_text); leave it out");
    }
    return Refuse("reasoning." + key, "not supported (effort is)");
  }
  if (const ordered_json* effort = Field(*v, "effort")) (*chat)["reasoning_effort"] = *effort;
  return std::nullopt;
}

Error Translate(const ordered_json& body, ResponsesRequest* out) {
  if (!body.is_object()) return Refuse("body", "expected a JSON object");
  if (Error e = CheckTopFields(body)) return e;
  const ordered_json* model = Field(body, "model");
  if (model == nullptr || !model->is_string()) return Refuse("model", "expected a string");
  ordered_json chat = {{"model", *model}};
  Conversation conv;
  if (const ordered_json* instructions = Field(body, "instructions")) {
    if (!instructions->is_string()) return Refuse("instructions", "expected a string");
    conv.messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const ordered_json* input = Field(body, "input");
  if (input == nullptr) return Refuse("input", "required");
  if (input->is_string()) {
    conv.messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      if (Error e = conv.Add((*input)[i], "input[" + std::to_string(i) + "]")) return e;
    }
    conv.Finish();
  } else {
    return Refuse("input", "expected a string or a list of input items");
  }
  chat["messages"] = std::move(conv.messages);
  if (const ordered_json* m = Field(body, "max_output_tokens")) chat["max_tokens"] = *m;
  for (const char* key : {"temperature", "top_p", "stream"}) {
    if (const ordered_json* v = Field(body, key)) chat[key] = *v;
  }
  if (Error e = ReadTools(body, &chat)) return e;
  if (Error e = ReadToolChoice(body, &chat)) return e;
  if (Error e = ReadTextFormat(body, &chat)) return e;
  if (Error e = ReadReasoning(body, &chat)) return e;
  // What the response object echoes.
  ordered_json& echo = out->echo;
  echo["instructions"] = body.value("instructions", ordered_json(nullptr));
  echo["max_output_tokens"] = body.value("max_output_tokens", ordered_json(nullptr));
  echo["temperature"] = body.value("temperature", ordered_json(1.0));
  echo["top_p"] = body.value("top_p", ordered_json(1.0));
  echo["tools"] = body.value("tools", ordered_json::array());
  echo["tool_choice"] = body.value("tool_choice", ordered_json("auto"));
  echo["text"] = body.value("text", ordered_json{{"format", {{"type", "text"}}}});
  echo["reasoning"] = body.value("reasoning", ordered_json::object());
  echo["metadata"] = body.value("metadata", ordered_json::object());
  out->chat_body = std::move(chat);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> TranslateResponsesRequest(std::string_view body, ResponsesRequest* out) {
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidRequest("", "request body: not valid JSON");
  try {
    return Translate(j, out);
  } catch (const nlohmann::json::exception& e) {
    return InvalidRequest("", std::string("request body: ") + e.what());
  }
}

std::string ResponsesParam(const std::string& chat_param) {
  if (chat_param == "max_tokens") return "max_output_tokens";
  if (chat_param.starts_with("response_format")) return "text.format";
  if (chat_param == "reasoning_effort") return "reasoning.effort";
  if (chat_param.starts_with("messages")) return "input";
  return chat_param;
}

}  // namespace spark::engine::server
