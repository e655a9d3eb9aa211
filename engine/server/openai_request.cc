#include "engine/server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/strings.h"
#include "engine/server/request_fields.h"
#include "engine/server/structured_request.h"

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;
using Error = std::optional<ApiError>;

constexpr int kMaxNesting = 64;  // Deeper JSON is refused before parsing.
constexpr int kMaxN = 16;
constexpr int kMaxTopLogprobs = 20;

// The deepest nesting of arrays/objects in `text`, outside strings.
int MaxNestingDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

const ordered_json* Field(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Error ReadNumber(const ordered_json& j, const char* key, double lo, double hi, float* dst) {
  const ordered_json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return InvalidRequest(key, std::string(key) + ": expected a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    return InvalidRequest(key, std::string(key) + ": " + FormatNumber(x) + " is outside [" +
                                   FormatNumber(lo) + ", " + FormatNumber(hi) + "]");
  }
  *dst = static_cast<float>(x);
  return std::nullopt;
}

Error ReadInt(const ordered_json& j, const char* key, int64_t lo, int64_t hi, int64_t* dst) {
  const ordered_json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer())
    return InvalidRequest(key, std::string(key) + ": expected an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : v->get<int64_t>();
  if (x < lo || x > hi) {
    return InvalidRequest(key, std::string(key) + ": " + std::to_string(x) + " is outside [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *dst = x;
  return std::nullopt;
}

Error ReadInt32(const ordered_json& j, const char* key, int64_t lo, int64_t hi, int* dst) {
  int64_t x = *dst;
  if (Error e = ReadInt(j, key, lo, hi, &x)) return e;
  *dst = static_cast<int>(x);
  return std::nullopt;
}

Error ReadBool(const ordered_json& j, const char* key, bool* dst) {
  const ordered_json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return InvalidRequest(key, std::string(key) + ": expected true or false");
  *dst = v->get<bool>();
  return std::nullopt;
}

Error ReadTokenIds(const ordered_json& v, const char* key, std::vector<int32_t>* dst) {
  for (const ordered_json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return InvalidRequest(key, std::string(key) + ": expected a list of token ids");
    }
    dst->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

Error ReadStop(const ordered_json& j, runtime::SamplingParams* p) {
  const ordered_json* v = Field(j, "stop");
  if (v != nullptr) {
    if (v->is_string()) {
      p->stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const ordered_json& s : *v) {
        if (!s.is_string())
          return InvalidRequest("stop", "stop: expected a string or a list of strings");
        p->stop.push_back(s.get<std::string>());
      }
    } else {
      return InvalidRequest("stop", "stop: expected a string or a list of strings");
    }
    for (const std::string& s : p->stop) {
      if (s.empty()) return InvalidRequest("stop", "stop: empty stop strings are not allowed");
    }
  }
  if (const ordered_json* ids = Field(j, "stop_token_ids")) {
    if (!ids->is_array())
      return InvalidRequest("stop_token_ids", "stop_token_ids: expected a list");
    return ReadTokenIds(*ids, "stop_token_ids", &p->stop_token_ids);
  }
  return std::nullopt;
}

Error ReadSampling(const ordered_json& j, CompletionRequest* r) {
  runtime::SamplingParams& p = r->params;
  if (Error e = ReadNumber(j, "temperature", 0, 2, &p.temperature)) return e;
  if (Error e = ReadNumber(j, "top_p", 0, 1, &p.top_p)) return e;
  if (p.top_p <= 0) return InvalidRequest("top_p", "top_p: must be in (0, 1]");
  if (Error e = ReadInt32(j, "top_k", -1, INT32_MAX, &p.top_k)) return e;
  if (Error e = ReadNumber(j, "min_p", 0, 1, &p.min_p)) return e;
  if (Error e = ReadNumber(j, "presence_penalty", -2, 2, &p.presence_penalty)) return e;
  if (Error e = ReadNumber(j, "frequency_penalty", -2, 2, &p.frequency_penalty)) return e;
  if (Error e = ReadNumber(j, "repetition_penalty", 0.01, 100, &p.repetition_penalty)) return e;
  if (Error e = ReadBool(j, "ignore_eos", &p.ignore_eos)) return e;
  int64_t seed = 0;
  if (Error e = ReadInt(j, "seed", INT64_MIN, INT64_MAX, &seed)) return e;
  if (Field(j, "seed") != nullptr) p.seed = static_cast<uint64_t>(seed);
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    int v = 0;  // 0 only to score a prompt (checked with the logprob fields, ReadLogprobs)
    if (Error e = ReadInt32(j, key, 0, INT32_MAX, &v)) return e;
    if (Field(j, key) != nullptr) r->max_tokens = v;
  }
  if (Error e = ReadInt32(j, "n", 1, kMaxN, &r->n)) return e;
  if (const ordered_json* best_of = Field(j, "best_of")) {
    if (*best_of != r->n) {
      return InvalidRequest("best_of", "best_of: " + best_of->dump() +
                                           " is not supported (vLLM's v1 engine dropped it too); "
                                           "request n choices and rank them yourself");
    }
  }
  if (Error e = ReadLogitControls(j, r)) return e;
  if (Error e = ReadBool(j, "skip_special_tokens", &r->skip_special_tokens)) return e;
  if (Error e = ReadBool(j, "include_stop_str_in_output", &r->include_stop_str_in_output)) return e;
  return ReadStop(j, &p);
}

Error ReadStream(const ordered_json& j, CompletionRequest* r) {
  if (Error e = ReadBool(j, "stream", &r->stream)) return e;
  const ordered_json* opts = Field(j, "stream_options");
  if (opts == nullptr) return std::nullopt;
  if (!opts->is_object())
    return InvalidRequest("stream_options", "stream_options: expected an object");
  if (!r->stream) {
    return InvalidRequest("stream_options",
                          "stream_options: only allowed with \"stream\": true");
  }
  for (const auto& [key, value] : opts->items()) {
    if (key == "include_usage") continue;
    if (key == "continuous_usage_stats" && value == false) continue;
    return InvalidRequest("stream_options." + key,
                          "stream_options." + key + ": not supported (include_usage is)");
  }
  if (Error e = ReadBool(*opts, "include_usage", &r->include_usage)) {
    e->param = "stream_options.include_usage";
    return e;
  }
  return std::nullopt;
}

// Prompt scoring: vLLM's prompt_logprobs, echo with logprobs on completions (every prompt token
// scored, as vLLM does), max_tokens 0 (score only), return_tokens_as_token_ids.
Error ReadPromptScoring(const ordered_json& j, CompletionRequest* r) {
  if (Error e = ReadInt32(j, "prompt_logprobs", 0, kMaxTopLogprobs, &r->prompt_logprobs)) return e;
  if (Field(j, "prompt_logprobs") == nullptr) r->prompt_logprobs = -1;
  if (Error e = ReadBool(j, "return_tokens_as_token_ids", &r->return_tokens_as_token_ids)) {
    return e;
  }
  if (r->prompt_logprobs >= 0 && r->stream) {
    return InvalidRequest("prompt_logprobs",
                          "prompt_logprobs: not supported with \"stream\": true (echo with "
                          "logprobs streams the prompt's scores on /v1/completions)");
  }
  int scored = r->prompt_logprobs;
  if (r->echo && r->logprobs) scored = std::max(scored, r->top_logprobs);
  const bool zero = r->max_tokens && *r->max_tokens == 0;
  if (zero && !r->echo && r->prompt_logprobs < 0) {
    return InvalidRequest("max_tokens",
                          "max_tokens: 0 generates nothing; it is allowed only to score the "
                          "prompt (echo on /v1/completions, or prompt_logprobs)");
  }
  if (zero && scored < 0) scored = 0;  // echo alone: the prompt runs, nothing is generated
  r->params.prompt_logprobs = scored;
  return std::nullopt;
}

// Chat: logprobs (bool) + top_logprobs (int). Completions: logprobs (int).
Error ReadLogprobs(const ordered_json& j, CompletionRequest* r) {
  if (r->endpoint == Endpoint::kChat) {
    if (Error e = ReadBool(j, "logprobs", &r->logprobs)) return e;
    if (Error e = ReadInt32(j, "top_logprobs", 0, kMaxTopLogprobs, &r->top_logprobs)) return e;
    if (r->top_logprobs > 0 && !r->logprobs) {
      return InvalidRequest("top_logprobs", "top_logprobs: requires logprobs to be true");
    }
  } else {
    if (Error e = ReadInt32(j, "logprobs", 0, kMaxTopLogprobs, &r->top_logprobs)) return e;
    r->logprobs = Field(j, "logprobs") != nullptr;
    if (Error e = ReadBool(j, "echo", &r->echo)) return e;
  }
  r->params.logprobs = r->logprobs;
  r->params.top_logprobs = r->top_logprobs;
  return ReadPromptScoring(j, r);
}

Error ReadToolChoice(const ordered_json& j, CompletionRequest* r) {
  const ordered_json* v = Field(j, "tool_choice");
  if (v == nullptr) return std::nullopt;
  r->tool_choice_set = true;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s != "auto" && s != "none" && s != "required") {
      return InvalidRequest("tool_choice",
                            "tool_choice: '" + s + "' is not one of none, auto, required");
    }
    r->tool_choice = s;
  } else if (v->is_object() && v->contains("function") && (*v)["function"].is_object() &&
             (*v)["function"].contains("name") && (*v)["function"]["name"].is_string()) {
    r->tool_choice = "function";
    r->tool_choice_function = (*v)["function"]["name"].get<std::string>();
  } else {
    return InvalidRequest("tool_choice",
                          "tool_choice: expected none, auto, required or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (r->chat.tools.empty()) {
    return InvalidRequest("tool_choice",
                          "tool_choice: given without `tools`; send the tools the model may "
                          "call, or leave tool_choice out");
  }
  if (r->tool_choice == "function") {
    const std::vector<std::string> names = ToolNames(r->chat.tools);
    if (std::find(names.begin(), names.end(), r->tool_choice_function) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      return InvalidRequest("tool_choice", "tool_choice: function '" + r->tool_choice_function +
                                               "' is not among `tools` (" + known + ")");
    }
  }
  return std::nullopt;
}

Error ReadChat(const ordered_json& j, CompletionRequest* r) {
  Result<tokenizer::ChatRequest> chat = tokenizer::ParseChatRequest(j);
  if (!chat.ok()) {
    const std::string& m = chat.status().message();
    const size_t colon = m.find(':');
    return InvalidRequest(colon == std::string::npos ? "messages" : m.substr(0, colon), m);
  }
  r->chat = std::move(*chat);
  for (const char* key : {"thinking", "enable_thinking"}) {
    auto it = r->chat.template_kwargs.find(key);
    if (it != r->chat.template_kwargs.end() && !it->is_boolean() && !it->is_null()) {
      return InvalidRequest(std::string("chat_template_kwargs.") + key,
                            std::string("chat_template_kwargs.") + key +
                                ": expected true or false");
    }
  }
  if (Error e = ReadBool(j, "add_generation_prompt", &r->chat.add_generation_prompt)) return e;
  if (Error e = ReadReasoningEffort(j, r)) return e;
  return ReadToolChoice(j, r);
}

constexpr size_t kMaxPrompts = 256;  // prompts in one batched completions request

Error ReadPrompt(const ordered_json& j, CompletionRequest* r) {
  const ordered_json* v = Field(j, "prompt");
  if (v == nullptr) return InvalidRequest("prompt", "prompt: required");
  const char* expected =
      "prompt: expected a string, a list of token ids, or a batch: a list of strings or a list "
      "of token-id lists";
  if (v->is_string()) {
    r->prompt_texts.push_back(v->get<std::string>());
  } else if (v->is_array() && !v->empty() && (*v)[0].is_string()) {
    for (const ordered_json& p : *v) {
      if (!p.is_string()) return InvalidRequest("prompt", expected);
      r->prompt_texts.push_back(p.get<std::string>());
    }
  } else if (v->is_array() && !v->empty() && (*v)[0].is_array()) {
    r->prompt_is_ids = true;
    for (const ordered_json& p : *v) {
      if (!p.is_array() || p.empty()) return InvalidRequest("prompt", expected);
      r->prompt_id_lists.emplace_back();
      if (Error e = ReadTokenIds(p, "prompt", &r->prompt_id_lists.back())) return e;
    }
  } else if (v->is_array() && !v->empty()) {
    r->prompt_is_ids = true;
    r->prompt_id_lists.emplace_back();
    if (Error e = ReadTokenIds(*v, "prompt", &r->prompt_id_lists.back())) return e;
  } else {
    return InvalidRequest("prompt", expected);
  }
  for (const std::string& t : r->prompt_texts) {
    if (t.empty()) return InvalidRequest("prompt", "prompt: must not be empty");
  }
  const size_t count = r->prompt_is_ids ? r->prompt_id_lists.size() : r->prompt_texts.size();
  if (count > kMaxPrompts) {
    return InvalidRequest("prompt", "prompt: a batch of " + std::to_string(count) +
                                        " prompts; at most " + std::to_string(kMaxPrompts));
  }
  if (r->prompt_is_ids) {
    r->prompt_ids = r->prompt_id_lists[0];
  } else {
    r->prompt_text = r->prompt_texts[0];
  }
  return std::nullopt;
}

Error ParseObject(Endpoint endpoint, const ordered_json& j, CompletionRequest* r) {
  if (!j.is_object()) return InvalidRequest("", "request body: expected a JSON object");
  r->endpoint = endpoint;
  const ordered_json* model = Field(j, "model");
  if (model == nullptr || !model->is_string())
    return InvalidRequest("model", "model: expected a string");
  r->model = model->get<std::string>();
  if (Error e = CheckRequestFields(endpoint, j)) return e;
  if (Error e = endpoint == Endpoint::kChat ? ReadChat(j, r) : ReadPrompt(j, r)) return e;
  if (Error e = ReadStream(j, r)) return e;
  if (Error e = ReadSampling(j, r)) return e;
  if (Error e = ReadStructuredOutput(j, r)) return e;
  return ReadLogprobs(j, r);
}

}  // namespace

std::vector<std::string> ToolNames(const nlohmann::ordered_json& tools) {
  std::vector<std::string> names;
  for (const auto& t : tools) {
    const auto& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (f.is_object() && f.contains("name") && f["name"].is_string()) {
      names.push_back(f["name"].get<std::string>());
    }
  }
  return names;
}

std::string ApiError::ToJson() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false,
                                           nlohmann::json::error_handler_t::replace);
}

ApiError InvalidRequest(std::string param, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::optional<ApiError> ParseCompletionRequest(Endpoint endpoint, std::string_view body,
                                               CompletionRequest* out) {
  if (MaxNestingDepth(body) > kMaxNesting) {
    return InvalidRequest("",
                          "request body: JSON nested deeper than " + std::to_string(kMaxNesting));
  }
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidRequest("", "request body: not valid JSON");
  try {
    return ParseObject(endpoint, j, out);
  } catch (const nlohmann::json::exception& e) {  // A type the checks above did not foresee.
    return InvalidRequest("", std::string("request body: ") + e.what());
  }
}

}  // namespace spark::engine::server
