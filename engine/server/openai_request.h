// OpenAI request bodies (/v1/chat/completions, /v1/completions) parsed and type-checked into
// one plain struct, and the OpenAI error object. Every rejection names the offending field in
// `param`, as OpenAI does. A field the server does not implement is refused by name
// (request_fields.h), never ignored.
// Thread-safety: pure functions over values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar_compiler.h"
#include "engine/runtime/sampling_params.h"
#include "engine/tokenizer/chat_format.h"

namespace spark::engine::server {

// {"error": {"message", "type", "param", "code"}} with the HTTP status it is sent with.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // Empty -> null.
  std::string code;   // Empty -> null.

  std::string ToJson() const;
};

ApiError InvalidRequest(std::string param, std::string message);

enum class Endpoint { kChat, kCompletion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  // Chat: the conversation (messages, tools, chat_template_kwargs).
  tokenizer::ChatRequest chat;
  // Completions: the prompt as text, or as token ids (the first prompt of a batch).
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  // Completions: every prompt of the request (a batch: a list of strings or of token-id lists),
  // the first one included; each gets n choices, numbered prompt after prompt.
  std::vector<std::string> prompt_texts;
  std::vector<std::vector<int32_t>> prompt_id_lists;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;
  // max_tokens / max_completion_tokens when given; otherwise the endpoint's default.
  std::optional<int> max_tokens;
  runtime::SamplingParams params;
  // Chat: logprobs=true, top_logprobs=k. Completions: logprobs=k (k alternatives).
  bool logprobs = false;
  int top_logprobs = 0;
  // "auto" (the default), "none", "required" or "function" (tool_choice_function names it;
  // it is one of the request's tools). tool_choice_set: the request gave tool_choice, which
  // then requires `tools`.
  std::string tool_choice = "auto";
  std::string tool_choice_function;
  bool tool_choice_set = false;
  bool echo = false;  // Completions only.
  // vLLM's prompt_logprobs (-1: not asked): each prompt token's log-probability with this many
  // alternatives, in the response's `prompt_logprobs`. Not with stream.
  int prompt_logprobs = -1;
  // vLLM's: tokens in logprobs written as "token_id:<id>" instead of their text.
  bool return_tokens_as_token_ids = false;
  // vLLM's: drop special tokens' text from the output (default true), and keep the stop string
  // that ended a choice (default false).
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  // response_format / structured_outputs; compiled by the server (grammar_compiler.h).
  std::optional<grammar::ConstraintRequest> structured;
};

// The function names of a request's `tools`, in order.
std::vector<std::string> ToolNames(const nlohmann::ordered_json& tools);

// Parses a request body for `endpoint`. On failure returns the 400 error naming the field.
std::optional<ApiError> ParseCompletionRequest(Endpoint endpoint, std::string_view body,
                                               CompletionRequest* out);

}  // namespace spark::engine::server
