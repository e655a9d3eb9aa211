// The OpenAI API as `sparkctl check` and `sparkctl bench serve` use it: JSON requests, and
// streamed chat/completions whose events are timed as they arrive (time to first token, last
// token, the usage block's token counts, tool calls reassembled from their pieces).
// Thread-safety: functions over values; an Endpoint may be shared by concurrent calls.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "sparkctl/serving/http_client.h"

namespace spark::serving {

struct Endpoint {
  Url url;
  std::string api_key;  // "" when the server takes none.
  std::string model;    // The served model name ("model" in requests).
};

struct JsonReply {
  int status = 0;
  nlohmann::json body;  // The parsed body; null when it was not JSON.
  std::string raw;
};

// GET / POST a JSON body. The errors of HttpCall.
Result<JsonReply> GetJson(const Endpoint& e, const std::string& path,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));
Result<JsonReply> PostJson(const Endpoint& e, const std::string& path, const nlohmann::json& body,
                           std::chrono::milliseconds timeout = std::chrono::seconds(600));

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

// One streamed request, as the client saw it.
struct StreamResult {
  using Clock = std::chrono::steady_clock;
  int status = 0;          // HTTP status; an error body is in `error`.
  std::string error;       // The server's error message (HTTP error, or an error event).
  Clock::time_point start;        // Request sent.
  Clock::time_point first_token;  // First event with text, reasoning or a tool call.
  Clock::time_point last_token;   // Last such event.
  Clock::time_point done;         // [DONE] (or the end of the stream).
  int token_events = 0;           // Events that carried generated text.
  bool saw_done = false;          // The stream ended with data: [DONE].
  std::string content;
  std::string reasoning;
  std::string finish_reason;
  nlohmann::json tool_calls = nlohmann::json::array();  // [{"id", "name", "arguments"}]
  std::optional<Usage> usage;                           // The usage chunk.

  double ttft_seconds() const;    // start -> first_token (0 without one)
  double decode_seconds() const;  // first_token -> last_token
  double total_seconds() const;   // start -> done
};

// POSTs `body` to `path` (/v1/chat/completions or /v1/completions) with stream: true and
// stream_options.include_usage, and reads the events as they arrive. The errors of HttpCall;
// an HTTP error status is a result with `status` and `error` set.
Result<StreamResult> Stream(const Endpoint& e, const std::string& path, nlohmann::json body,
                            std::chrono::milliseconds timeout = std::chrono::seconds(600));

// The served models (GET /v1/models): the first id, or NotFound / the HTTP error as a Status.
Result<std::string> FirstModel(const Endpoint& e);

}  // namespace spark::serving
