#include "engine/server/request_fields.h"

#include <array>
#include <string>

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;

enum Where : unsigned { kChat = 1, kCompletion = 2, kBoth = 3 };

struct Field {
  std::string_view name;
  unsigned where;
};

// Read by openai_request.cc.
constexpr std::array<Field, 42> kImplemented = {{
    {"model", kBoth},
    {"stream", kBoth},
    {"stream_options", kBoth},
    {"n", kBoth},
    {"best_of", kBoth},  // Only equal to n (it then changes nothing).
    {"max_tokens", kBoth},
    {"temperature", kBoth},
    {"top_p", kBoth},
    {"top_k", kBoth},
    {"min_p", kBoth},
    {"presence_penalty", kBoth},
    {"frequency_penalty", kBoth},
    {"repetition_penalty", kBoth},
    {"seed", kBoth},
    {"stop", kBoth},
    {"stop_token_ids", kBoth},
    {"ignore_eos", kBoth},
    {"min_tokens", kBoth},
    {"logprobs", kBoth},
    {"logit_bias", kBoth},
    {"response_format", kBoth},
    {"structured_outputs", kBoth},
    {"skip_special_tokens", kBoth},
    {"include_stop_str_in_output", kBoth},
    {"messages", kChat},
    {"tools", kChat},
    {"tool_choice", kChat},
    {"parallel_tool_calls", kChat},            // Only true: every call is parsed.
    {"chat_template_kwargs", kChat},
    {"reasoning_effort", kChat},
    {"max_completion_tokens", kChat},
    {"top_logprobs", kChat},
    {"add_generation_prompt", kChat},
    {"continue_final_message", kChat},         // Only false.
    {"modalities", kChat},                     // Only ["text"].
    {"prompt", kCompletion},
    {"echo", kCompletion},
    {"prompt_logprobs", kBoth},
    {"return_tokens_as_token_ids", kBoth},
    {"store", kBoth},                          // Only false: nothing is stored.
    {"service_tier", kBoth},                   // Only "auto" or "default": one tier.
    {"user", kBoth},                           // Accepted, ignored: see kIgnored.
}};

struct Ignored {
  std::string_view name;
  std::string_view reason;
};

// Accepted without effect, as vLLM does; docs/server.md lists the same reasons.
constexpr std::array<Ignored, 4> kIgnored = {{
    {"user", "an end-user id for the provider's abuse monitoring; this server has none"},
    {"safety_identifier", "OpenAI's newer name for `user`; this server has no abuse monitoring"},
    {"metadata", "tags for stored completions; this server stores nothing"},
    {"prompt_cache_key", "the prefix cache matches prompts by content, without a key"},
}};

// vLLM's removed names, and what to send instead.
struct Renamed {
  std::string_view name;
  std::string_view use;
};
constexpr std::array<Renamed, 9> kRenamed = {{
    {"guided_json", "structured_outputs.json"},
    {"guided_regex", "structured_outputs.regex"},
    {"guided_choice", "structured_outputs.choice"},
    {"guided_grammar", "structured_outputs.grammar"},
    {"guided_decoding_backend", "nothing (one grammar backend: xgrammar)"},
    {"guided_whitespace_pattern", "structured_outputs.disable_any_whitespace"},
    {"functions", "tools"},
    {"function_call", "tool_choice"},
    {"max_new_tokens", "max_tokens"},
}};

// Fields with one accepted value: any other is refused.
std::optional<ApiError> CheckFixedValue(const std::string& key, const ordered_json& v) {
  auto refuse = [&](const std::string& why) {
    return InvalidRequest(key, key + ": " + v.dump() + " is not supported; " + why);
  };
  if (key == "parallel_tool_calls" && v != true) {
    return refuse("every call the model writes is returned (send true or leave it out)");
  }
  if (key == "continue_final_message" && v != false) {
    return refuse("the reply always starts a new assistant turn (send false or leave it out)");
  }
  if (key == "modalities" && v != ordered_json::array({"text"})) {
    return refuse("this server produces text only (send [\"text\"] or leave it out)");
  }
  if (key == "store" && v != false) {
    return refuse("this server stores no completions (send false or leave it out)");
  }
  if (key == "service_tier" && v != "auto" && v != "default") {
    return refuse("this server has one tier (send \"auto\" or \"default\", or leave it out)");
  }
  return std::nullopt;
}

}  // namespace

std::string_view IgnoredFieldReason(std::string_view field) {
  for (const Ignored& i : kIgnored) {
    if (i.name == field) return i.reason;
  }
  return "";
}

std::optional<ApiError> CheckRequestFields(Endpoint endpoint, const ordered_json& body) {
  const unsigned where = endpoint == Endpoint::kChat ? kChat : kCompletion;
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;  // An explicit null is an absent field, as in OpenAI's API.
    bool known = !IgnoredFieldReason(key).empty();
    for (const Field& f : kImplemented) {
      if (f.name != key) continue;
      if ((f.where & where) == 0) {
        return InvalidRequest(key, key + ": not a parameter of " +
                                       (endpoint == Endpoint::kChat ? "/v1/chat/completions"
                                                                    : "/v1/completions"));
      }
      known = true;
    }
    for (const Renamed& r : kRenamed) {
      if (r.name == key) {
        return InvalidRequest(key, key + ": not supported; send " + std::string(r.use) +
                                       " instead");
      }
    }
    if (!known) {
      return InvalidRequest(key, key + ": not a parameter this server implements, so it is "
                                       "refused rather than ignored (docs/server.md lists the "
                                       "parameters); remove it");
    }
    if (auto e = CheckFixedValue(key, value)) return e;
  }
  return std::nullopt;
}

}  // namespace spark::engine::server
