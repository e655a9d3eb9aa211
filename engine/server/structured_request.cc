#include "engine/server/structured_request.h"

#include <array>
#include <string>

#include "base/strings.h"

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;
using Error = std::optional<ApiError>;
using Kind = grammar::ConstraintRequest::Kind;

const ordered_json* Field(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Error ReadResponseFormat(const ordered_json& v, CompletionRequest* r) {
  if (!v.is_object()) return InvalidRequest("response_format", "response_format: expected an object");
  for (const auto& [key, _] : v.items()) {
    if (key != "type" && key != "json_schema") {
      return InvalidRequest("response_format." + key,
                            "response_format." + key + ": not a field of response_format");
    }
  }
  const ordered_json* type = Field(v, "type");
  if (type == nullptr || !type->is_string()) {
    return InvalidRequest("response_format.type",
                          "response_format.type: expected \"text\", \"json_object\" or "
                          "\"json_schema\"");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  grammar::ConstraintRequest c;
  c.param = "response_format";
  if (t == "json_object") {
    c.kind = Kind::kJsonObject;
    r->structured = std::move(c);
    return std::nullopt;
  }
  if (t != "json_schema") {
    return InvalidRequest("response_format.type",
                          "response_format.type: \"" + t +
                              "\" is not supported (text, json_object, json_schema)");
  }
  const ordered_json* js = Field(v, "json_schema");
  if (js == nullptr || !js->is_object()) {
    return InvalidRequest("response_format.json_schema",
                          "response_format.json_schema: required with type json_schema: "
                          "{\"name\": ..., \"schema\": {...}, \"strict\": true}");
  }
  for (const auto& [key, value] : js->items()) {
    if (key == "schema" || key == "description") continue;
    if (key == "name" && value.is_string()) continue;
    if (key == "strict" && (value.is_boolean() || value.is_null())) continue;
    return InvalidRequest("response_format.json_schema." + key,
                          "response_format.json_schema." + key +
                              (key == "name" || key == "strict" ? ": wrong type"
                                                                : ": not a field of json_schema"));
  }
  const ordered_json* schema = Field(*js, "schema");
  if (schema == nullptr) {
    return InvalidRequest("response_format.json_schema.schema",
                          "response_format.json_schema.schema: required (the JSON Schema the "
                          "reply must follow)");
  }
  c.kind = Kind::kJsonSchema;
  c.param = "response_format.json_schema.schema";
  c.schema = *schema;
  r->structured = std::move(c);
  return std::nullopt;
}

Error ReadStructuredOutputs(const ordered_json& v, CompletionRequest* r) {
  const std::string p = "structured_outputs";
  if (!v.is_object()) return InvalidRequest(p, p + ": expected an object");
  grammar::ConstraintRequest c;
  int kinds = 0;
  for (const auto& [key, value] : v.items()) {
    const std::string at = p + "." + key;
    if (value.is_null()) continue;
    if (key == "json") {
      ++kinds;
      c.kind = Kind::kJsonSchema;
      c.param = at;
      if (value.is_string()) {
        c.schema = ordered_json::parse(value.get<std::string>(), nullptr, false);
        if (c.schema.is_discarded()) return InvalidRequest(at, at + ": not valid JSON");
      } else {
        c.schema = value;
      }
    } else if (key == "regex" || key == "grammar") {
      ++kinds;
      if (!value.is_string()) return InvalidRequest(at, at + ": expected a string");
      c.kind = key == "regex" ? Kind::kRegex : Kind::kGrammar;
      c.param = at;
      c.text = value.get<std::string>();
    } else if (key == "choice") {
      ++kinds;
      c.kind = Kind::kChoice;
      c.param = at;
      if (!value.is_array()) return InvalidRequest(at, at + ": expected a list of strings");
      for (const ordered_json& s : value) {
        if (!s.is_string()) return InvalidRequest(at, at + ": expected a list of strings");
        c.choices.push_back(s.get<std::string>());
      }
    } else if (key == "json_object") {
      if (value != true) return InvalidRequest(at, at + ": only true is meaningful");
      ++kinds;
      c.kind = Kind::kJsonObject;
      c.param = at;
    } else if (key == "disable_any_whitespace") {
      if (!value.is_boolean()) return InvalidRequest(at, at + ": expected true or false");
      c.any_whitespace = !value.get<bool>();
    } else if (key == "disable_fallback" || key == "disable_additional_properties") {
      // There is one backend (no fallback), and properties a schema does not list are never
      // generated: both values behave alike.
      if (!value.is_boolean()) return InvalidRequest(at, at + ": expected true or false");
    } else {
      return InvalidRequest(at, at + ": not supported (json, regex, choice, grammar, "
                                     "json_object, disable_any_whitespace)");
    }
  }
  if (kinds != 1) {
    return InvalidRequest(p, p + ": give exactly one of json, regex, choice, grammar, "
                                 "json_object");
  }
  r->structured = std::move(c);
  return std::nullopt;
}

}  // namespace

Error ReadStructuredOutput(const ordered_json& body, CompletionRequest* r) {
  const ordered_json* format = Field(body, "response_format");
  const ordered_json* outputs = Field(body, "structured_outputs");
  if (format != nullptr && outputs != nullptr) {
    return InvalidRequest("structured_outputs",
                          "structured_outputs: give it or response_format, not both");
  }
  if (format != nullptr) return ReadResponseFormat(*format, r);
  if (outputs != nullptr) return ReadStructuredOutputs(*outputs, r);
  return std::nullopt;
}

Error ReadLogitControls(const ordered_json& body, CompletionRequest* r) {
  if (const ordered_json* bias = Field(body, "logit_bias")) {
    if (!bias->is_object()) {
      return InvalidRequest("logit_bias",
                            "logit_bias: expected an object of token id -> bias, e.g. "
                            "{\"1234\": -100}");
    }
    for (const auto& [key, value] : bias->items()) {
      const std::optional<int64_t> parsed = ParseInt(key);
      const int64_t id = parsed.value_or(-1);
      if (id < 0 || id > INT32_MAX) {
        return InvalidRequest("logit_bias", "logit_bias: key \"" + key + "\" is not a token id");
      }
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
        return InvalidRequest("logit_bias", "logit_bias[\"" + key + "\"]: " + value.dump() +
                                                " is not a number in [-100, 100]");
      }
      r->params.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (const ordered_json* v = Field(body, "min_tokens")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > INT32_MAX) {
      return InvalidRequest("min_tokens", "min_tokens: expected an integer >= 0");
    }
    r->params.min_tokens = static_cast<int>(v->get<int64_t>());
  }
  return std::nullopt;
}

Error ReadReasoningEffort(const ordered_json& body, CompletionRequest* r) {
  const ordered_json* v = Field(body, "reasoning_effort");
  if (v == nullptr) return std::nullopt;
  static constexpr std::array<std::string_view, 7> kNames = {"none", "minimal", "low", "medium",
                                                             "high", "xhigh",   "max"};
  bool ok = false;
  if (v->is_string()) {
    for (std::string_view n : kNames) ok = ok || n == v->get<std::string>();
  } else if (v->is_number_integer()) {
    ok = v->get<int64_t>() >= 1 && v->get<int64_t>() <= 100;
  }
  if (!ok) {
    return InvalidRequest("reasoning_effort",
                          "reasoning_effort: " + v->dump() +
                              " is not an effort (none, minimal, low, medium, high, xhigh, max, "
                              "or a number 1-100 on DeepSeek-V4.1's scale)");
  }
  if (!r->chat.template_kwargs.contains("reasoning_effort")) {
    r->chat.template_kwargs["reasoning_effort"] = *v;
  }
  return std::nullopt;
}

}  // namespace spark::engine::server
