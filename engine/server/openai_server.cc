#include "engine/server/openai_server.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "base/logging.h"
#include "base/strings.h"
#include "base/version.h"
#include "engine/server/anthropic_messages.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

HttpResponse JsonResponse(int status, const json& body) {
  return {
      status, "application/json", {}, body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

HttpResponse ErrorResponse(const ApiError& e) {
  return {e.http_status, "application/json", {}, e.ToJson()};
}

ApiError MakeError(int status, std::string type, std::string message, std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

std::string Path(const std::string& target) { return target.substr(0, target.find('?')); }

// %XX escapes of a path segment decoded (model names may hold '/').
std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The grammar of a forced call's continuation after the prefilled markup: the arguments of the
// named function, or the name and arguments of any of the request's tools.
grammar::ConstraintRequest ForcedCallGrammar(const CompletionRequest& r,
                                             const tokenizer::ToolCallPrefill& prefill) {
  grammar::ConstraintRequest c;
  c.kind = grammar::ConstraintRequest::Kind::kToolCall;
  c.param = "tool_choice";
  for (size_t i = 0; i < r.chat.tools.size(); ++i) {
    const auto& tool = r.chat.tools[i];
    const auto& f = tool.is_object() && tool.contains("function") ? tool["function"] : tool;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
    const std::string name = f["name"].get<std::string>();
    if (r.tool_choice == "function" && name != r.tool_choice_function) continue;
    grammar::ToolCallForm form;
    if (r.tool_choice != "function") form.prefix = name + prefill.name_suffix;
    form.parameters = f.contains("parameters") && !f["parameters"].is_null()
                          ? f["parameters"]
                          : nlohmann::ordered_json{{"type", "object"}, {"properties", json::object()}};
    form.parameters_param = "tools[" + std::to_string(i) + "].function.parameters";
    form.suffix = prefill.arguments_suffix;
    c.calls.push_back(std::move(form));
  }
  return c;
}

}  // namespace

bool IsLoopbackAddress(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Result<std::unique_ptr<grammar::GrammarCompiler>> MakeGrammarCompiler(const TextCodec& codec,
                                                                      int vocab_size,
                                                                      int threads) {
  grammar::GrammarVocabulary vocabulary;
  vocabulary.tokens = codec.GrammarTokens();
  vocabulary.vocab_size = vocab_size;
  if (static_cast<int>(vocabulary.tokens.size()) > vocabulary.vocab_size) {
    vocabulary.tokens.resize(vocabulary.vocab_size);  // A tokenizer larger than the model.
  }
  for (int32_t id : codec.stop_token_ids()) {
    if (id < vocabulary.vocab_size) vocabulary.stop_ids.push_back(id);
  }
  return grammar::GrammarCompiler::Create(vocabulary, threads);
}

Result<std::unique_ptr<OpenAIServer>> OpenAIServer::Start(
    const OpenAIServerOptions& options, GenerationService* service, const TextCodec* codec,
    std::unique_ptr<grammar::GrammarCompiler> grammar) {
  if (!IsLoopbackAddress(options.http.host) && options.api_keys.empty()) {
    return FailedPreconditionError("--host " + options.http.host +
                                   " is not a loopback address: an API key is required "
                                   "(--api-key-file FILE)");
  }
  if (!IsLoopbackAddress(options.http.host) && !options.http.tls.enabled()) {
    Logger("server")->warn("--host {} without --ssl-certfile: API keys travel in clear text on "
                           "the network (fine on a trusted LAN; docs/server.md \"TLS\")",
                           options.http.host);
  }
  std::unique_ptr<OpenAIServer> server(new OpenAIServer(options, service, codec));
  if (grammar == nullptr) {
    SPARK_ASSIGN_OR_RETURN(grammar, MakeGrammarCompiler(*codec, service->vocab_size(),
                                                        options.grammar_threads));
  }
  server->context_->grammar = std::move(grammar);
  OpenAIServer* self = server.get();
  SPARK_ASSIGN_OR_RETURN(server->http_,
                         HttpServer::Start(options.http, [self](HttpRequest r, auto w) {
                           self->Handle(std::move(r), std::move(w));
                         }));
  server->watchdog_ = std::thread([self] { self->WatchCanary(); });
  Logger("server")->info("serving {} on {}://{}:{}", options.served_model_name,
                         options.http.tls.enabled() ? "https" : "http", options.http.host,
                         server->port());
  return server;
}

OpenAIServer::OpenAIServer(const OpenAIServerOptions& options, GenerationService* service,
                           const TextCodec* codec)
    : options_(options),
      metrics_(
          std::make_shared<ServerMetrics>(options.served_model_name, service->max_model_len())),
      context_(std::make_shared<ServerContext>()),
      canary_guard_(std::make_shared<CanaryGuard>()),
      auth_failures_(std::make_unique<AuthFailures>(options.auth_failures)) {
  context_->service = service;
  context_->codec = codec;
  context_->metrics = metrics_;
  context_->model_name = options.served_model_name;
  canary_guard_->server = this;
}

OpenAIServer::~OpenAIServer() { Stop(); }

void OpenAIServer::Stop() {
  {
    std::lock_guard lock(ready_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  ready_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  {
    std::lock_guard lock(canary_guard_->mu);
    canary_guard_->server = nullptr;
  }
  if (http_) http_->Stop();
}

Status OpenAIServer::Drain(std::chrono::milliseconds timeout) {
  draining_ = true;
  http_->StopAccepting();
  const Clock::time_point deadline = Clock::now() + timeout;
  // Sequences end before their responses are fully written: wait for both.
  auto busy = [this] { return context_->active_sequences > 0 || http_->num_active_requests() > 0; };
  while (busy() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (busy()) {
    return DeadlineExceededError(std::to_string(context_->active_sequences) + " sequence(s), " +
                                 std::to_string(http_->num_active_requests()) +
                                 " response(s) still running after the drain timeout");
  }
  return Status::Ok();
}

void OpenAIServer::Handle(HttpRequest request, std::shared_ptr<ResponseWriter> writer) {
  const std::string path = Path(request.target);
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  if (path == "/health" && get) return writer->Send({200, "application/json", {}, ""});
  if (path == "/metrics" && get) {
    return writer->Send({200,
                         "text/plain; version=0.0.4; charset=utf-8",
                         {},
                         metrics_->Render(context_->service->Stats())});
  }
  if (path == "/ready" && get) return HandleReady(writer);
  if (path == "/version" && get) {
    return writer->Send(JsonResponse(200, {{"version", kVersion}, {"build", BuildCommit()}}));
  }
  const bool chat = path == "/v1/chat/completions", completion = path == "/v1/completions";
  const bool models = path == "/v1/models" || path.starts_with("/v1/models/");
  const bool tokenize = path == "/tokenize", detokenize = path == "/detokenize";
  // Anthropic's Messages API and OpenAI's Responses API (anthropic_messages.h, responses_api.h).
  const bool messages = path == "/v1/messages", count_tokens = path == "/v1/messages/count_tokens";
  const bool responses = path == "/v1/responses";
  const bool anthropic = path.starts_with("/v1/messages");  // Errors in Anthropic's shape.
  auto error_response = [anthropic](const ApiError& e) {
    return anthropic ? AnthropicErrorResponse(e) : ErrorResponse(e);
  };
  if (!chat && !completion && !models && !tokenize && !detokenize && !messages && !count_tokens &&
      !responses) {
    return writer->Send(error_response(MakeError(404, "invalid_request_error", "no route " + path)));
  }
  if ((models && !get) || (!models && !post)) {
    return writer->Send(error_response(
        MakeError(405, "invalid_request_error", request.method + " " + path + " is not allowed")));
  }
  if (!options_.api_keys.empty()) {
    const auto now = AuthFailures::Clock::now();
    if (const int wait = auth_failures_->RetryAfterSeconds(request.peer, now); wait > 0) {
      HttpResponse r = error_response(MakeError(
          429, "rate_limit_exceeded",
          "too many failed API key attempts from " + request.peer + "; retry later"));
      r.headers.emplace_back("Retry-After", std::to_string(wait));
      return writer->Send(std::move(r));
    }
    // Anthropic's clients send the key as x-api-key.
    const std::string x_api_key = anthropic ? request.Header("x-api-key") : "";
    if (!options_.api_keys.Check(request.Header("authorization")) &&
        (x_api_key.empty() || !options_.api_keys.Check("Bearer " + x_api_key))) {
      if (auth_failures_->Fail(request.peer, now)) {
        Logger("server")->warn("refused a missing or wrong API key from {} (further failures "
                               "from this address are rate-limited, not logged)",
                               request.peer);
      }
      return writer->Send(error_response(
          MakeError(401, "invalid_request_error",
                    anthropic ? "missing or invalid API key (x-api-key or Authorization: Bearer ...)"
                              : "missing or invalid API key (Authorization: Bearer ...)", "invalid_api_key")));
    }
  }
  if (models) return HandleModels(path.size() > 11 ? path.substr(11) : "", writer);
  if (tokenize) return HandleTokenize(request, writer);
  if (detokenize) return HandleDetokenize(request, writer);
  if (messages || count_tokens) return HandleMessages(request, writer, count_tokens);
  if (responses) return HandleResponses(request, writer);
  HandleCompletion(chat ? Endpoint::kChat : Endpoint::kCompletion, request, writer);
}

void OpenAIServer::HandleModels(const std::string& id,
                                std::shared_ptr<ResponseWriter> writer) const {
  const std::string& name = options_.served_model_name;
  json model = {{"id", name},
                {"object", "model"},
                {"created", std::time(nullptr)},
                {"owned_by", "spark-engine"},
                {"root", name},
                {"parent", nullptr},
                {"max_model_len", context_->service->max_model_len()}};
  if (id.empty()) {
    return writer->Send(JsonResponse(200, {{"object", "list"}, {"data", json::array({model})}}));
  }
  if (PercentDecode(id) != name) {
    ApiError e = MakeError(404, "invalid_request_error",
                           "The model `" + PercentDecode(id) + "` does not exist; this server "
                           "serves `" + name + "`.", "model_not_found");
    e.param = "model";
    return writer->Send(ErrorResponse(e));
  }
  writer->Send(JsonResponse(200, model));
}

namespace {

// The body of /tokenize or /detokenize as a JSON object with only `allowed` fields, or the 400.
std::optional<ApiError> ParseUtilityBody(const std::string& body,
                                         std::initializer_list<std::string_view> allowed,
                                         nlohmann::ordered_json* out) {
  *out = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    return InvalidRequest("", "request body: expected a JSON object");
  }
  for (const auto& [key, value] : out->items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return InvalidRequest(key, key + ": not a parameter of this endpoint; remove it");
    }
  }
  return std::nullopt;
}

}  // namespace

void OpenAIServer::HandleTokenize(const HttpRequest& request,
                                  std::shared_ptr<ResponseWriter> writer) const {
  nlohmann::ordered_json j;
  if (auto e = ParseUtilityBody(request.body,
                                {"model", "prompt", "messages", "tools", "chat_template_kwargs",
                                 "add_generation_prompt", "add_special_tokens",
                                 "return_token_strs"},
                                &j)) {
    return writer->Send(ErrorResponse(*e));
  }
  if (j.contains("model") && j["model"] != options_.served_model_name) {
    ApiError e = InvalidRequest("model", "The model `" + j["model"].dump() +
                                             "` does not exist; this server serves `" +
                                             options_.served_model_name + "`.");
    e.code = "model_not_found";
    return writer->Send(ErrorResponse(e));
  }
  const TextCodec& codec = *context_->codec;
  const bool chat = j.contains("messages");
  if (chat == j.contains("prompt")) {
    return writer->Send(
        ErrorResponse(InvalidRequest("prompt", "give `prompt` (text) or `messages` (a chat)")));
  }
  for (const char* key : {"add_generation_prompt", "add_special_tokens", "return_token_strs"}) {
    if (j.contains(key) && !j[key].is_boolean()) {
      return writer->Send(
          ErrorResponse(InvalidRequest(key, std::string(key) + ": expected true or false")));
    }
  }
  std::vector<int32_t> ids;
  if (chat) {
    Result<tokenizer::ChatRequest> c = tokenizer::ParseChatRequest(j);
    if (!c.ok()) return writer->Send(ErrorResponse(InvalidRequest("messages", c.status().message())));
    Result<std::string> text = codec.RenderChat(*c);
    if (!text.ok()) {
      return writer->Send(ErrorResponse(InvalidRequest("messages", text.status().message())));
    }
    ids = codec.Encode(*text, j.value("add_special_tokens", false));
  } else {
    if (!j["prompt"].is_string()) {
      return writer->Send(ErrorResponse(InvalidRequest("prompt", "prompt: expected a string")));
    }
    ids = codec.Encode(j["prompt"].get<std::string>(), j.value("add_special_tokens", true));
  }
  json out = {{"count", ids.size()},
              {"max_model_len", context_->service->max_model_len()},
              {"tokens", ids},
              {"token_strs", nullptr}};
  if (j.value("return_token_strs", false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(codec.TokenText(id));
    out["token_strs"] = strs;
  }
  writer->Send(JsonResponse(200, out));
}

void OpenAIServer::HandleDetokenize(const HttpRequest& request,
                                    std::shared_ptr<ResponseWriter> writer) const {
  nlohmann::ordered_json j;
  if (auto e = ParseUtilityBody(request.body, {"model", "tokens"}, &j)) {
    return writer->Send(ErrorResponse(*e));
  }
  if (j.contains("model") && j["model"] != options_.served_model_name) {
    ApiError e = InvalidRequest("model", "The model `" + j["model"].dump() +
                                             "` does not exist; this server serves `" +
                                             options_.served_model_name + "`.");
    e.code = "model_not_found";
    return writer->Send(ErrorResponse(e));
  }
  const int vocab = context_->service->vocab_size();
  std::vector<int32_t> ids;
  const auto tokens = j.find("tokens");
  bool ok = tokens != j.end() && tokens->is_array();
  for (size_t i = 0; ok && i < tokens->size(); ++i) {
    const auto& t = (*tokens)[i];
    ok = t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab;
    if (ok) ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (!ok) {
    return writer->Send(ErrorResponse(InvalidRequest(
        "tokens", "tokens: expected a list of token ids below " + std::to_string(vocab))));
  }
  writer->Send(JsonResponse(200, {{"prompt", context_->codec->Decode(ids)}}));
}

void OpenAIServer::HandleCompletion(Endpoint endpoint, const HttpRequest& request,
                                    std::shared_ptr<ResponseWriter> writer) {
  if (draining_) {
    return writer->Send(ErrorResponse(MakeError(503, "server_error", "server is shutting down")));
  }
  CompletionRequest parsed;
  if (auto e = ParseCompletionRequest(endpoint, request.body, &parsed))
    return writer->Send(ErrorResponse(*e));
  PreparedRequest prepared;
  if (auto e = Prepare(std::move(parsed), &prepared)) return writer->Send(ErrorResponse(*e));
  Run(std::move(prepared), std::move(writer));
}

void OpenAIServer::Run(PreparedRequest prepared, std::shared_ptr<ResponseWriter> writer) {
  // Every choice of every prompt of a batch is a sequence.
  const int n = prepared.request.n * static_cast<int>(prepared.prompts.size());
  if (context_->active_sequences.fetch_add(n) + n > options_.max_pending_sequences) {
    context_->active_sequences -= n;
    metrics_->CountRejected();
    const ApiError busy =
        MakeError(429, "rate_limit_exceeded",
                  "server busy: " + std::to_string(options_.max_pending_sequences) +
                      " sequences in flight; retry later",
                  "rate_limit_exceeded");
    HttpResponse r = prepared.shape ? prepared.shape->Error(busy) : ErrorResponse(busy);
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
    return writer->Send(std::move(r));
  }
  std::make_shared<CompletionJob>(context_, std::move(prepared), std::move(writer))->Start();
}

std::optional<ApiError> OpenAIServer::PrepareChat(CompletionRequest& request,
                                                  PreparedRequest* out) const {
  const TextCodec& codec = *context_->codec;
  // As vLLM: with tool_choice "none" the tools stay in the prompt, but the output is not parsed
  // for calls.
  out->parse_tools = !request.chat.tools.empty() && request.tool_choice != "none";
  Result<std::string> text = codec.RenderChat(request.chat);
  if (!text.ok()) return InvalidRequest("messages", text.status().message());
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
  const std::string& think = codec.markers().think_begin;
  out->starts_in_reasoning = !think.empty() && t.ends_with(think);
  const std::string& think_end = codec.markers().think_end;
  out->prompt_closed_think = !think_end.empty() && t.ends_with(think_end);
  if (request.tool_choice == "required" || request.tool_choice == "function") {
    // The reply begins a call in the model's format, and a grammar writes the rest of it.
    out->tool_prefill = codec.ForcedToolCall(request.chat, request.tool_choice_function);
    *text += out->tool_prefill.prompt_suffix + out->tool_prefill.markup;
    out->tool_markup = out->tool_prefill.markup;
    out->tool_required = true;
    out->tool_names = ToolNames(request.chat.tools);
    out->starts_in_reasoning = false;
    out->prompt_closed_think = true;
  }
  out->prompt = codec.Encode(*text, /*add_special=*/false);
  return std::nullopt;
}

std::optional<ApiError> OpenAIServer::Prepare(CompletionRequest request,
                                              PreparedRequest* out) const {
  if (request.model != options_.served_model_name) {
    ApiError e = InvalidRequest("model", "The model `" + request.model +
                                             "` does not exist; this "
                                             "server serves `" +
                                             options_.served_model_name + "`.");
    e.code = "model_not_found";
    return e;
  }
  const TextCodec& codec = *context_->codec;
  if (request.endpoint == Endpoint::kChat) {
    if (auto e = PrepareChat(request, out)) return e;
  } else {
    const size_t count =
        request.prompt_is_ids ? request.prompt_id_lists.size() : request.prompt_texts.size();
    for (size_t i = 0; i < count; ++i) {
      out->prompts.push_back(request.prompt_is_ids ? request.prompt_id_lists[i]
                                                   : codec.Encode(request.prompt_texts[i], true));
      if (request.echo) {
        out->echo_texts.push_back(request.prompt_is_ids ? codec.Decode(out->prompts.back())
                                                        : request.prompt_texts[i]);
      }
    }
    if (!out->prompts.empty()) out->prompt = out->prompts[0];
  }
  if (out->prompts.empty()) out->prompts.push_back(out->prompt);
  const std::string prompt_param = request.endpoint == Endpoint::kChat ? "messages" : "prompt";
  const int vocab = context_->service->vocab_size();
  for (const std::vector<int32_t>& prompt : out->prompts) {
    if (prompt.empty()) return InvalidRequest(prompt_param, prompt_param + ": the prompt is empty");
    for (int32_t t : prompt) {
      if (t >= vocab) {
        return InvalidRequest(prompt_param, "prompt: token id " + std::to_string(t) +
                                                " is outside the vocabulary of " +
                                                std::to_string(vocab));
      }
    }
  }
  for (const auto& [token, bias] : request.params.logit_bias) {
    if (token >= vocab) {
      return InvalidRequest("logit_bias", "logit_bias: token id " + std::to_string(token) +
                                              " is outside the vocabulary of " +
                                              std::to_string(vocab));
    }
  }
  out->request = std::move(request);
  if (auto e = SetMaxTokens(out)) return e;
  return SetConstraint(out);
}

std::optional<ApiError> OpenAIServer::SetConstraint(PreparedRequest* p) const {
  CompletionRequest& r = p->request;
  std::optional<grammar::ConstraintRequest> c = r.structured;
  if (p->tool_required) {
    if (c) {
      return InvalidRequest(c->param.substr(0, c->param.find('.')),
                            c->param.substr(0, c->param.find('.')) +
                                ": cannot be combined with tool_choice \"" + r.tool_choice +
                                "\" (the reply is then a tool call)");
    }
    c = ForcedCallGrammar(r, p->tool_prefill);
    p->tool_closing = p->tool_prefill.closing;
  }
  if (!c) return std::nullopt;
  Result<std::shared_ptr<const runtime::ConstraintSpec>> spec = context_->grammar->Compile(*c);
  if (!spec.ok()) {
    const std::string& m = spec.status().message();
    return InvalidRequest(m.substr(0, m.find(':')), m);
  }
  r.params.constraint = std::move(*spec);
  const TextCodec& codec = *context_->codec;
  runtime::ConstraintGate& gate = r.params.constraint_gate;
  if (r.endpoint == Endpoint::kChat) {
    gate.think_begin = codec.SingleTokenId(codec.markers().think_begin);
    gate.think_end = codec.SingleTokenId(codec.markers().think_end);
    gate.starts_in_reasoning = p->starts_in_reasoning;
    gate.may_open = !p->starts_in_reasoning && !p->prompt_closed_think;
    if (p->starts_in_reasoning && gate.think_end < 0) {
      return InvalidRequest(c->param.substr(0, c->param.find('.')),
                            c->param.substr(0, c->param.find('.')) +
                                ": structured output starts after the think block, and this "
                                "tokenizer has no single token for `" +
                                codec.markers().think_end +
                                "`; turn thinking off (chat_template_kwargs)");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> OpenAIServer::SetMaxTokens(PreparedRequest* p) const {
  CompletionRequest& r = p->request;
  const int max_len = context_->service->max_model_len();
  int prompt = static_cast<int>(p->prompt.size());
  for (const std::vector<int32_t>& other : p->prompts) {  // a batch: its longest prompt
    prompt = std::max(prompt, static_cast<int>(other.size()));
  }
  const std::string prompt_param = r.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (prompt >= max_len) {
    return InvalidRequest(prompt_param,
                          "This model's maximum context length is " + std::to_string(max_len) +
                              " tokens. However, your request has " + std::to_string(prompt) +
                              " input tokens. Please reduce the length of the input.");
  }
  const std::string max_param = "max_tokens";
  if (r.max_tokens && options_.max_tokens_limit > 0 && *r.max_tokens > options_.max_tokens_limit) {
    return InvalidRequest(max_param, max_param + ": " + std::to_string(*r.max_tokens) +
                                         " is above this server's limit of " +
                                         std::to_string(options_.max_tokens_limit) +
                                         " tokens per reply");
  }
  if (r.max_tokens && *r.max_tokens > max_len - prompt) {
    return InvalidRequest(max_param, max_param + ": this model's maximum context length is " +
                                         std::to_string(max_len) +
                                         " tokens. However, you requested " +
                                         std::to_string(prompt + *r.max_tokens) + " tokens (" +
                                         std::to_string(prompt) + " in the input, " +
                                         std::to_string(*r.max_tokens) + " in the completion).");
  }
  const int room = max_len - prompt;
  int fallback = options_.default_max_tokens > 0      ? options_.default_max_tokens
                 : r.endpoint == Endpoint::kChat ? room
                                                 : 16;
  if (options_.max_tokens_limit > 0) fallback = std::min(fallback, options_.max_tokens_limit);
  r.params.max_tokens = r.max_tokens.value_or(std::min(fallback, room));
  if (r.params.min_tokens > r.params.max_tokens) {
    return InvalidRequest("min_tokens", "min_tokens: " + std::to_string(r.params.min_tokens) +
                                            " is above max_tokens " +
                                            std::to_string(r.params.max_tokens));
  }
  if (!r.params.ignore_eos) {
    for (int32_t id : context_->codec->stop_token_ids()) {
      if (std::count(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), id) == 0) {
        r.params.stop_token_ids.push_back(id);
      }
    }
  }
  if (Status s = r.params.Validate(); !s.ok()) {
    const size_t colon = s.message().find(':');
    return InvalidRequest(colon == std::string::npos ? "" : s.message().substr(0, colon),
                          s.message());
  }
  return std::nullopt;
}

void OpenAIServer::HandleReady(std::shared_ptr<ResponseWriter> writer) {
  // A group known to be broken (a dead rank) answers at once, even while the engine thread is
  // still stuck in a collective with the dead peer.
  if (Status broken = context_->service->broken(); !broken.ok()) {
    return writer->Send(
        JsonResponse(503, {{"status", "unavailable"}, {"error", broken.message()}}));
  }
  // The memory guard holds admission: a canary would only wait (or be shed); say why at once.
  if (const ServiceStats stats = context_->service->Stats();
      stats.memory_guard && stats.memory_guard->state != runtime::GuardState::kOk) {
    const runtime::MemoryGuardStatus& g = *stats.memory_guard;
    return writer->Send(JsonResponse(
        503,
        {{"status", "unavailable"},
         {"error", "memory guard " + std::string(runtime::GuardStateName(g.state)) + ": " +
                       HumanBytes(static_cast<uint64_t>(std::max<int64_t>(0, g.available_bytes))) +
                       " available on rank " + std::to_string(g.rank) + "'s node (admit floor " +
                       HumanBytes(static_cast<uint64_t>(g.admit_floor_bytes)) + ")"}}));
  }
  std::unique_lock lock(ready_mu_);
  if (canary_running_ && canary_busy_) {
    lock.unlock();
    return writer->Send(JsonResponse(200, {{"status", "ready"}, {"busy", true}}));
  }
  const bool fresh = canary_result_ && Clock::now() - canary_time_ < options_.ready_cache;
  if (fresh && !canary_running_) {
    const Status s = *canary_result_;
    lock.unlock();
    if (s.ok()) return writer->Send(JsonResponse(200, {{"status", "ready"}}));
    return writer->Send(JsonResponse(503, {{"status", "unavailable"}, {"error", s.message()}}));
  }
  ready_waiters_.push_back(std::move(writer));
  if (canary_running_) return;
  canary_running_ = true;
  canary_id_ = context_->next_id.fetch_add(1);
  canary_deadline_ = Clock::now() + options_.ready_timeout;
  canary_started_ = Clock::now();
  canary_busy_ = false;
  lock.unlock();
  StartCanary();
}

void OpenAIServer::StartCanary() {
  GenerationRequest g;
  {
    std::lock_guard lock(ready_mu_);
    g.id = canary_id_;
  }
  g.prompt = context_->codec->Encode("ready", false);
  const int vocab = context_->service->vocab_size();
  if (g.prompt.empty() ||
      std::any_of(g.prompt.begin(), g.prompt.end(), [vocab](int32_t t) { return t >= vocab; })) {
    g.prompt = {0};  // A tokenizer larger than the model (test checkpoints): any valid id will do.
  }
  g.params.temperature = 0;
  g.params.max_tokens = 1;
  g.params.ignore_eos = true;
  const uint64_t id = g.id;
  Status s = context_->service->Submit(
      std::move(g), [guard = canary_guard_, id](const GenerationEvent& e) {
        if (!e.finished) return;
        std::lock_guard lock(guard->mu);
        if (guard->server == nullptr) return;
        if (!e.error.ok()) return guard->server->FinishCanary(id, e.error);
        guard->server->FinishCanary(
            id, e.has_token ? Status::Ok()
                            : UnavailableError("the canary request ended without a token"));
      });
  if (!s.ok()) FinishCanary(id, s);
}

void OpenAIServer::FinishCanary(uint64_t id, Status result) {
  std::vector<std::shared_ptr<ResponseWriter>> waiters;
  {
    std::lock_guard lock(ready_mu_);
    if (!canary_running_ || id != canary_id_) return;
    canary_running_ = false;
    canary_busy_ = false;
    canary_result_ = result;
    canary_time_ = Clock::now();
    waiters.swap(ready_waiters_);
  }
  if (!result.ok()) Logger("server")->warn("/ready: {}", result.ToString());
  for (auto& w : waiters) {
    if (result.ok())
      w->Send(JsonResponse(200, {{"status", "ready"}}));
    else
      w->Send(JsonResponse(503, {{"status", "unavailable"}, {"error", result.ToString()}}));
  }
}

void OpenAIServer::AnswerBusy(std::unique_lock<std::mutex>& lock) {
  canary_busy_ = true;
  std::vector<std::shared_ptr<ResponseWriter>> waiters;
  waiters.swap(ready_waiters_);
  lock.unlock();
  for (auto& w : waiters) w->Send(JsonResponse(200, {{"status", "ready"}, {"busy", true}}));
}

// Fails a canary that has not produced its token by its deadline while the engine stands still
// (a hung rank never answers); behind work that progresses it answers "busy" instead.
void OpenAIServer::WatchCanary() {
  std::unique_lock lock(ready_mu_);
  while (!stopping_) {
    ready_cv_.wait_for(lock, std::chrono::milliseconds(50));
    // When the engine's counters last moved, followed whether or not a canary runs.
    const Clock::time_point now = Clock::now();
    const ServiceStats stats = context_->service->Stats();
    if (const uint64_t p = stats.num_steps + stats.prompt_tokens_computed; p != progress_mark_) {
      progress_mark_ = p;
      progress_at_ = now;
    }
    if (!canary_running_) continue;
    const uint64_t id = canary_id_;
    if (Status broken = context_->service->broken(); !broken.ok()) {
      lock.unlock();
      FinishCanary(id, broken);  // the waiters learn which rank died, not a timeout later
      lock.lock();
      continue;
    }
    // Behind running work that moves, or inside a step that has not run too long: busy, not hung.
    const bool in_step =
        stats.step_seconds >= 0 &&
        stats.step_seconds * 1000 < static_cast<double>(options_.ready_step_timeout.count());
    const bool progressing =
        in_step || (stats.num_running > 0 && now - progress_at_ < options_.ready_timeout);
    if (!progressing) canary_busy_ = false;  // new waiters wait for the canary's verdict again
    if (progressing && !canary_busy_ && now - canary_started_ >= options_.ready_busy_after) {
      AnswerBusy(lock);
      lock.lock();
      continue;
    }
    if (now < canary_deadline_) continue;
    if (progressing) {
      canary_deadline_ = now + options_.ready_timeout;
      continue;
    }
    lock.unlock();
    FinishCanary(id, DeadlineExceededError("no token within " +
                                           std::to_string(options_.ready_timeout.count()) +
                                           " ms: a rank is hung or the engine is stalled"));
    context_->service->Cancel(id);
    lock.lock();
  }
}

}  // namespace spark::engine::server
