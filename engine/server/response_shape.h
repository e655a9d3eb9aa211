// ResponseShape: how a CompletionJob writes its one choice when the request came through an API
// other than OpenAI's chat completions (/v1/messages, /v1/responses). The job still runs the
// sequence, the detokenizer, stop strings and the reasoning and tool-call parsers; the shape only
// turns the parsed pieces into that API's stream events or final object, and errors into that
// API's error body. Requests with a shape have exactly one choice.
// Thread-safety: called by the job under its mutex, one call at a time.
#pragma once

#include <string>

#include "engine/server/http_server.h"
#include "engine/server/openai_request.h"
#include "engine/server/output_parser.h"

namespace spark::engine::server {

// How the choice ended, and what it cost.
struct ChoiceEnd {
  std::string finish_reason;  // "stop", "length", "tool_calls", "abort"
  std::string stop_sequence;  // The stop string that ended the choice; empty otherwise.
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

class ResponseShape {
 public:
  virtual ~ResponseShape() = default;
  // Streaming: the events before the first token (the stream is already started).
  virtual void StreamStart(ResponseWriter& w, int prompt_tokens) = 0;
  // Streaming: what the parsers made of the latest text.
  virtual void StreamDelta(ResponseWriter& w, const ParsedOutput& delta) = 0;
  // Streaming: the closing events (the job ends the stream afterwards).
  virtual void StreamEnd(ResponseWriter& w, const ChoiceEnd& end) = 0;
  // Not streaming: the whole response.
  virtual HttpResponse Full(const ParsedOutput& total, const ChoiceEnd& end) = 0;
  // An error in this API's shape: as a response, or as an event of a started stream.
  virtual HttpResponse Error(const ApiError& e) const = 0;
  virtual void StreamError(ResponseWriter& w, const ApiError& e) = 0;
};

}  // namespace spark::engine::server
