// The routes of the other APIs clients bring: Anthropic's Messages API and OpenAI's Responses
// API. Each translates its body into a chat-completions request (anthropic_messages.h,
// responses_api.h), which then runs exactly as /v1/chat/completions does, answered in its own
// shape (response_shape.h).
#include <nlohmann/json.hpp>

#include "engine/server/anthropic_messages.h"
#include "engine/server/openai_server.h"
#include "engine/server/responses_api.h"

namespace spark::engine::server {
namespace {

// An error found in the translated body, renamed to the field the client sent.
ApiError Renamed(ApiError e, std::string (*rename)(const std::string&)) {
  const std::string param = rename(e.param);
  if (param != e.param) {
    if (!e.param.empty() && e.message.starts_with(e.param)) {
      e.message = param + e.message.substr(e.param.size());
    }
    e.param = param;
  }
  return e;
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

ApiError ShuttingDown() {
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.message = "server is shutting down";
  return e;
}

}  // namespace

void OpenAIServer::HandleMessages(const HttpRequest& request,
                                  std::shared_ptr<ResponseWriter> writer, bool count_tokens) {
  auto fail = [&writer](const ApiError& e) {
    writer->Send(AnthropicErrorResponse(Renamed(e, AnthropicParam)));
  };
  if (draining_) return fail(ShuttingDown());
  MessagesRequest m;
  if (auto e = TranslateMessagesRequest(request.body, count_tokens, &m)) return fail(*e);
  CompletionRequest parsed;
  if (auto e = ParseCompletionRequest(Endpoint::kChat, Dump(m.chat_body), &parsed)) {
    return fail(*e);
  }
  if (count_tokens) {
    if (parsed.model != options_.served_model_name) {
      return fail(InvalidRequest("model", "model: `" + parsed.model +
                                              "` does not exist; this "
                                              "server serves `" +
                                              options_.served_model_name + "`"));
    }
    PreparedRequest p;
    if (auto e = PrepareChat(parsed, &p)) return fail(*e);
    return writer->Send(
        {200, "application/json", {}, nlohmann::json{{"input_tokens", p.prompt.size()}}.dump()});
  }
  PreparedRequest prepared;
  if (auto e = Prepare(std::move(parsed), &prepared)) return fail(*e);
  prepared.shape = MakeMessagesShape(options_.served_model_name);
  Run(std::move(prepared), std::move(writer));
}

void OpenAIServer::HandleResponses(const HttpRequest& request,
                                   std::shared_ptr<ResponseWriter> writer) {
  auto fail = [&writer](const ApiError& e) {
    const ApiError r = Renamed(e, ResponsesParam);
    writer->Send({r.http_status, "application/json", {}, r.ToJson()});
  };
  if (draining_) return fail(ShuttingDown());
  ResponsesRequest r;
  if (auto e = TranslateResponsesRequest(request.body, &r)) return fail(*e);
  CompletionRequest parsed;
  if (auto e = ParseCompletionRequest(Endpoint::kChat, Dump(r.chat_body), &parsed)) {
    return fail(*e);
  }
  PreparedRequest prepared;
  if (auto e = Prepare(std::move(parsed), &prepared)) return fail(*e);
  prepared.shape = MakeResponsesShape(options_.served_model_name, std::move(r.echo));
  Run(std::move(prepared), std::move(writer));
}

}  // namespace spark::engine::server
