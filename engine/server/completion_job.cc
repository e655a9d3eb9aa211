#include "engine/server/completion_job.h"

#include <algorithm>
#include <ctime>

#include "base/logging.h"
#include "engine/runtime/stop_strings.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string RandomHex(std::mt19937_64& rng, int chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < chars; ++i) out += kHex[rng() % 16];
  return out;
}

json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A span in seconds, 0 when either end was never reached.
double Span(Clock::time_point from, Clock::time_point to) {
  if (from == Clock::time_point() || to == Clock::time_point() || to < from) return 0;
  return Seconds(to - from);
}

RequestPhases Phases(const runtime::RequestTimes& t) {
  return {Span(t.queued, t.scheduled), Span(t.scheduled, t.first_token),
          Span(t.first_token, t.last_token), Span(t.scheduled, t.last_token)};
}

}  // namespace

CompletionJob::CompletionJob(std::shared_ptr<ServerContext> context, PreparedRequest prepared,
                             std::shared_ptr<ResponseWriter> writer)
    : context_(std::move(context)),
      prepared_(std::move(prepared)),
      writer_(std::move(writer)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      start_(Clock::now()),
      rng_(std::random_device{}()) {
  id_ =
      (prepared_.request.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + RandomHex(rng_, 32);
}

void CompletionJob::Start() {
  const CompletionRequest& req = prepared_.request;
  const bool chat = req.endpoint == Endpoint::kChat;
  const tokenizer::ChatMarkers& markers = context_->codec->markers();
  choices_.resize(prepared_.prompts.size() * req.n);
  for (size_t k = 0; k < choices_.size(); ++k) {
    Choice& c = choices_[k];
    c.prompt_index = k / req.n;
    c.seq_id = context_->next_id.fetch_add(1);
    c.stream = context_->codec->NewStream();
    if (chat) {
      c.reasoning = std::make_unique<ReasoningParser>(markers.think_begin, markers.think_end,
                                                      prepared_.starts_in_reasoning);
    }
    if (prepared_.parse_tools) c.tools = std::make_unique<ToolCallParser>(markers);
    if (c.tools && !prepared_.tool_markup.empty()) {
      c.prefill = c.tools->Push(prepared_.tool_markup);
    }
    c.last_token_time = start_;
  }
  context_->metrics->AddPromptTokens(PromptTokens());
  if (req.stream) {
    writer_->StartStream(200, "text/event-stream");
    if (prepared_.shape) prepared_.shape->StreamStart(*writer_, static_cast<int>(prepared_.prompt.size()));
    for (int i = 0; chat && !prepared_.shape && i < req.n; ++i) {
      json chunk = ChunkBase();
      chunk["choices"] = json::array({{{"index", i},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}});
      WriteEvent(chunk);
    }
  }
  writer_->OnClientGone([weak = weak_from_this()] {
    if (auto job = weak.lock()) job->Cancel();
  });
  for (size_t i = 0; i < choices_.size(); ++i) {
    GenerationRequest g{choices_[i].seq_id, prepared_.prompts[choices_[i].prompt_index],
                        req.params};
    const int within = static_cast<int>(i) % req.n;  // the choice's place among its prompt's n
    if (g.params.seed && within > 0) g.params.seed = *g.params.seed + within;
    auto self = shared_from_this();
    Status s = context_->service->Submit(
        std::move(g), [self, i](const GenerationEvent& e) { self->OnEvent(i, e); });
    if (!s.ok()) {
      GenerationEvent e;
      e.id = choices_[i].seq_id;
      e.finished = true;
      e.error = s;
      OnEvent(i, e);
    }
  }
}

void CompletionJob::Cancel() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    for (const Choice& c : choices_) {
      if (!c.service_done) ids.push_back(c.seq_id);
    }
  }
  for (uint64_t id : ids) context_->service->Cancel(id);
}

void CompletionJob::OnEvent(size_t index, const GenerationEvent& event) {
  std::lock_guard lock(mu_);
  Choice& c = choices_[index];
  if (event.finished && !c.service_done) {
    c.service_done = true;
    --context_->active_sequences;
  }
  if (c.finished || failed_) return;
  if (!event.error.ok()) return Fail(event.error);
  if (index == 0 && c.num_tokens == 0) cached_tokens_ = event.cached_prompt_tokens;
  if (!c.prompt_seen) {
    if (Status s = AddPrompt(c, event); !s.ok()) return Fail(s);
  }
  if (event.has_token) {
    const Clock::time_point now = Clock::now();
    if (!first_token_seen_)
      context_->metrics->ObserveTimeToFirstToken(Seconds(now - start_));
    else if (c.num_tokens > 0)
      context_->metrics->ObserveInterTokenLatency(Seconds(now - c.last_token_time));
    first_token_seen_ = true;
    c.last_token_time = now;
    ++c.num_tokens;
    context_->metrics->AddGenerationTokens(1);
    if (prepared_.request.logprobs) AddLogprobs(c, event);
  }
  bool stop_matched = false;
  std::string text = NewText(c, event, &stop_matched);
  const bool final = event.finished || stop_matched;
  if (event.times) context_->metrics->ObserveRequestPhases(Phases(*event.times));
  // A forced call's grammar ends with its arguments and the model stops there: the markup that
  // closes the call completes it for the parser.
  if (event.finished && !stop_matched && event.finish_reason == runtime::FinishReason::kStop) {
    text += prepared_.tool_closing;
  }
  ParsedOutput delta = std::exchange(c.prefill, ParsedOutput());
  delta.Append(Parse(c, text, final));
  if (!c.echo.empty()) delta.content.insert(0, std::exchange(c.echo, std::string()));
  for (const ToolCallDelta& d : delta.tool_calls) c.num_tool_calls += d.begin ? 1 : 0;
  if (prepared_.request.stream) StreamDelta(index, c, delta);
  c.total.Append(std::move(delta));
  if (!final) return;
  if (stop_matched && !event.finished) context_->service->Cancel(c.seq_id);
  FinishChoice(c, stop_matched ? "stop" : runtime::FinishReasonName(event.finish_reason));
  if (prepared_.tool_required) {
    if (Status s = CheckForcedCalls(c); !s.ok()) return Fail(s);
  }
  if (prepared_.request.stream) StreamFinish(index, c);
  if (++num_finished_ == static_cast<int>(choices_.size())) Complete();
}

std::string CompletionJob::NewText(Choice& c, const GenerationEvent& event, bool* stop_matched) {
  const std::vector<int32_t>& stop_ids = context_->codec->stop_token_ids();
  const bool is_stop_token =
      event.finished && event.finish_reason == runtime::FinishReason::kStop &&
      (std::count(stop_ids.begin(), stop_ids.end(), event.token) > 0 ||
       std::count(prepared_.request.params.stop_token_ids.begin(),
                  prepared_.request.params.stop_token_ids.end(), event.token) > 0);
  std::string piece;
  const bool skipped = prepared_.request.skip_special_tokens &&
                       context_->codec->IsSpecialToken(event.token);
  if (event.has_token && !is_stop_token && !skipped) piece = c.stream->Push(event.token);
  if (event.finished) piece += c.stream->Flush();
  const size_t before = c.raw.size();
  c.raw += piece;
  size_t emit_to = c.raw.size();
  const std::vector<std::string>& stops = prepared_.request.params.stop;
  if (!stops.empty()) {
    const runtime::StopStringMatch m = runtime::FindStopString(c.raw, c.checked, stops);
    c.checked = before + piece.size();
    if (m.matched) {
      const size_t keep =
          m.emit_len + (prepared_.request.include_stop_str_in_output ? m.stop.size() : 0);
      c.raw.resize(keep);
      *stop_matched = true;
      c.stop_sequence = m.stop;
      emit_to = keep;
    } else if (!event.finished) {
      emit_to = m.emit_len;
    }
  }
  if (emit_to <= c.emitted) return "";
  std::string out = c.raw.substr(c.emitted, emit_to - c.emitted);
  c.emitted = emit_to;
  return out;
}

ParsedOutput CompletionJob::Parse(Choice& c, const std::string& text, bool final) {
  ParsedOutput out;
  if (!c.reasoning) {  // Completions: plain text.
    out.content = text;
    return out;
  }
  ParsedOutput r = c.reasoning->Push(text);
  if (final) r.Append(c.reasoning->Finish());
  out.reasoning = std::move(r.reasoning);
  if (!c.tools) {
    out.content = std::move(r.content);
    return out;
  }
  out.Append(c.tools->Push(r.content));
  if (final) out.Append(c.tools->Finish());
  return out;
}

void CompletionJob::AddLogprobs(Choice& c, const GenerationEvent& event) {
  const std::string text = TokenLabel(event.token);
  json top = json::array();
  for (const runtime::TokenLogprob& t : event.top_logprobs) {
    const std::string alt = TokenLabel(t.token);
    top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", Bytes(alt)}});
  }
  json entry = {
      {"token", text}, {"logprob", event.logprob}, {"bytes", Bytes(text)}, {"top_logprobs", top}};
  if (prepared_.request.endpoint == Endpoint::kCompletion) {  // text_offset counts the text
    entry["text_len"] = context_->codec->TokenText(event.token).size();
  }
  c.logprobs.push_back(std::move(entry));
}

// Chat-style logprob entries -> the completions API's parallel lists; text_offset counts on from
// the choice's text so far (the echoed prompt included).
json CompletionJob::CompletionLogprobs(Choice& c) const {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const json& e : c.logprobs) {
    out["tokens"].push_back(e["token"]);
    out["token_logprobs"].push_back(e["logprob"]);
    json top = e["top_logprobs"].is_null() ? json(nullptr) : json::object();
    for (const json& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(c.text_offset);
    c.text_offset += e.value("text_len", e["token"].get<std::string>().size());
  }
  return out;
}

std::string CompletionJob::TokenLabel(int32_t id) const {
  if (prepared_.request.return_tokens_as_token_ids) return "token_id:" + std::to_string(id);
  return context_->codec->TokenText(id);
}

Status CompletionJob::AddPrompt(Choice& c, const GenerationEvent& event) {
  c.prompt_seen = true;
  const CompletionRequest& req = prepared_.request;
  const std::vector<int32_t>& prompt = prepared_.prompts[c.prompt_index];
  if (req.echo && c.prompt_index < prepared_.echo_texts.size()) {
    c.echo = prepared_.echo_texts[c.prompt_index];
  }
  const bool echo_scores = req.echo && req.logprobs;
  if (!echo_scores && req.prompt_logprobs < 0) return Status::Ok();
  if (event.prompt_logprobs.size() + 1 != prompt.size()) {
    return InternalError("the engine scored " + std::to_string(event.prompt_logprobs.size()) +
                         " tokens of a prompt of " + std::to_string(prompt.size()));
  }
  json vllm = json::array({nullptr});
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string text = TokenLabel(prompt[i]);
    const size_t text_len = context_->codec->TokenText(prompt[i]).size();
    if (i == 0) {
      if (echo_scores) {
        c.logprobs.push_back({{"token", text},
                              {"logprob", nullptr},
                              {"bytes", Bytes(text)},
                              {"top_logprobs", nullptr},
                              {"text_len", text_len}});
      }
      continue;
    }
    const runtime::SampleResult& s = event.prompt_logprobs[i - 1];
    // vLLM's alternatives: the top k and the prompt's own token.
    json top = json::array(), dict = json::object();
    bool own = false;
    for (size_t k = 0; k < s.top_logprobs.size(); ++k) {
      const runtime::TokenLogprob& t = s.top_logprobs[k];
      const std::string alt = TokenLabel(t.token);
      if (static_cast<int>(k) < req.top_logprobs) {
        top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", Bytes(alt)}});
      }
      if (static_cast<int>(k) < req.prompt_logprobs) {
        dict[std::to_string(t.token)] = {{"logprob", t.logprob},
                                         {"rank", k + 1},
                                         {"decoded_token", context_->codec->TokenText(t.token)}};
      }
      own = own || t.token == prompt[i];
    }
    if (!own) top.push_back({{"token", text}, {"logprob", s.logprob}, {"bytes", Bytes(text)}});
    dict[std::to_string(prompt[i])] = {{"logprob", s.logprob},
                                       {"rank", s.rank},
                                       {"decoded_token", context_->codec->TokenText(prompt[i])}};
    if (echo_scores) {
      c.logprobs.push_back({{"token", text},
                            {"logprob", s.logprob},
                            {"bytes", Bytes(text)},
                            {"top_logprobs", top},
                            {"text_len", text_len}});
    }
    vllm.push_back(std::move(dict));
  }
  if (req.prompt_logprobs >= 0) c.prompt_logprobs = std::move(vllm);
  return Status::Ok();
}

void CompletionJob::FinishChoice(Choice& c, const std::string& reason) {
  c.finished = true;
  c.finish_reason = reason == "stop" && c.num_tool_calls > 0 ? "tool_calls" : reason;
}

json CompletionJob::ChunkBase() const {
  const bool chat = prepared_.request.endpoint == Endpoint::kChat;
  json j = {{"id", id_},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", context_->model_name}};
  if (prepared_.request.include_usage) j["usage"] = nullptr;
  return j;
}

json CompletionJob::ToolCallsJson(const std::vector<ToolCallDelta>& calls) {
  json out = json::array();
  for (const ToolCallDelta& call : calls) {
    out.push_back({{"id", ToolCallId()},
                   {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

std::string CompletionJob::ToolCallId() { return "call_" + RandomHex(rng_, 24); }

Status CompletionJob::CheckForcedCalls(const Choice& c) const {
  const CompletionRequest& req = prepared_.request;
  const std::string choice = req.tool_choice == "function"
                                 ? "tool_choice function '" + req.tool_choice_function + "'"
                                 : std::string("tool_choice \"required\"");
  auto fail = [&](const std::string& why) {
    return InvalidArgumentError(choice + ": the model's reply is not a valid tool call (" + why +
                                "; finish_reason " + c.finish_reason +
                                "); retry, raise max_tokens, or use tool_choice \"auto\"");
  };
  if (c.total.tool_calls.empty()) return fail("no call in the reply");
  const std::vector<std::string>& names = prepared_.tool_names;
  for (const ToolCallDelta& call : c.total.tool_calls) {
    if (std::find(names.begin(), names.end(), call.name) == names.end()) {
      return fail("call " + std::to_string(call.index) + " names unknown function '" + call.name +
                  "'");
    }
    const json args = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) {
      return fail("the arguments of call " + std::to_string(call.index) + " are not a JSON object");
    }
  }
  if (req.tool_choice == "function" && c.total.tool_calls[0].name != req.tool_choice_function) {
    return fail("it calls '" + c.total.tool_calls[0].name + "'");
  }
  return Status::Ok();
}

// One chunk per delta object; the choice's pending logprobs ride on the first.
void CompletionJob::WriteChunk(size_t index, Choice& c, json delta) {
  json chunk = ChunkBase();
  json choice = {{"index", index}, {"delta", std::move(delta)}};
  choice["logprobs"] = c.logprobs.empty() ? json(nullptr) : json{{"content", c.logprobs}};
  choice["finish_reason"] = nullptr;
  chunk["choices"] = json::array({choice});
  c.logprobs = json::array();
  WriteEvent(chunk);
}

// Text first, then each tool call piece as vLLM streams it: the first piece of a call carries
// index, id, type and the name (arguments ""), later pieces only index and argument text.
void CompletionJob::StreamDelta(size_t index, Choice& c, const ParsedOutput& delta) {
  if (prepared_.shape) {
    if (!delta.empty()) prepared_.shape->StreamDelta(*writer_, delta);
    return;
  }
  if (prepared_.request.endpoint == Endpoint::kCompletion) {
    if (delta.content.empty() && c.logprobs.empty()) return;
    json chunk = ChunkBase();
    json choice = {{"index", index}, {"text", delta.content}};
    choice["logprobs"] = c.logprobs.empty() ? json(nullptr) : CompletionLogprobs(c);
    choice["finish_reason"] = nullptr;
    chunk["choices"] = json::array({choice});
    c.logprobs = json::array();
    return WriteEvent(chunk);
  }
  const bool has_text = !delta.reasoning.empty() || !delta.content.empty();
  if (has_text || (delta.tool_calls.empty() && !c.logprobs.empty())) {
    json d = json::object();
    if (!delta.reasoning.empty()) d["reasoning_content"] = d["reasoning"] = delta.reasoning;
    if (!delta.content.empty()) d["content"] = delta.content;
    WriteChunk(index, c, std::move(d));
  }
  for (const ToolCallDelta& call : delta.tool_calls) {
    if (call.begin) {
      json entry = {{"index", call.index},
                    {"id", ToolCallId()},
                    {"type", "function"},
                    {"function", {{"name", call.name}, {"arguments", ""}}}};
      WriteChunk(index, c, {{"tool_calls", json::array({entry})}});
    }
    if (!call.arguments.empty()) {
      json entry = {{"index", call.index}, {"function", {{"arguments", call.arguments}}}};
      WriteChunk(index, c, {{"tool_calls", json::array({entry})}});
    }
  }
}

void CompletionJob::StreamFinish(size_t index, Choice& c) {
  if (prepared_.shape) return;  // The shape's closing events carry the usage: Complete().
  json chunk = ChunkBase();
  json choice = {{"index", index}};
  if (prepared_.request.endpoint == Endpoint::kChat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = c.finish_reason;
  chunk["choices"] = json::array({choice});
  WriteEvent(chunk);
}

void CompletionJob::WriteEvent(const json& j) { writer_->Write("data: " + Dump(j) + "\n\n"); }

int CompletionJob::PromptTokens() const {
  int n = 0;
  for (const std::vector<int32_t>& p : prepared_.prompts) n += static_cast<int>(p.size());
  return n;
}

json CompletionJob::Usage() const {
  int completion = 0;
  for (const Choice& c : choices_) completion += c.num_tokens;
  const int prompt = PromptTokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

FinishedRequest CompletionJob::Finished(const std::string& reason) const {
  FinishedRequest r;
  r.e2e_seconds = Seconds(Clock::now() - start_);
  r.finish_reason = reason;
  r.prompt_tokens = PromptTokens();
  for (const Choice& c : choices_) r.generation_tokens += c.num_tokens;
  r.n = prepared_.request.n;
  r.max_tokens = prepared_.request.max_tokens.value_or(0);
  return r;
}

void CompletionJob::Complete() {
  context_->metrics->ObserveRequestDone(Finished(choices_[0].finish_reason));
  if (prepared_.shape) {
    if (!prepared_.request.stream) {
      return writer_->Send(prepared_.shape->Full(choices_[0].total, End(choices_[0])));
    }
    prepared_.shape->StreamEnd(*writer_, End(choices_[0]));
    return writer_->EndStream();
  }
  if (!prepared_.request.stream) return SendFullResponse();
  if (prepared_.request.include_usage) {
    json chunk = ChunkBase();
    chunk["choices"] = json::array();
    chunk["usage"] = Usage();
    WriteEvent(chunk);
  }
  writer_->Write("data: [DONE]\n\n");
  writer_->EndStream();
}

ChoiceEnd CompletionJob::End(const Choice& c) const {
  ChoiceEnd end;
  end.finish_reason = c.finish_reason;
  end.stop_sequence = c.stop_sequence;
  end.prompt_tokens = static_cast<int>(prepared_.prompt.size());
  end.completion_tokens = c.num_tokens;
  end.cached_tokens = cached_tokens_;
  return end;
}

void CompletionJob::SendFullResponse() {
  const bool chat = prepared_.request.endpoint == Endpoint::kChat;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    json choice = {{"index", i}};
    if (chat) {
      const bool has_calls = !c.total.tool_calls.empty();
      json message = {{"role", "assistant"}};
      message["content"] =
          has_calls && c.total.content.empty() ? json(nullptr) : json(c.total.content);
      message["reasoning_content"] =
          c.total.reasoning.empty() ? json(nullptr) : json(c.total.reasoning);
      message["reasoning"] = message["reasoning_content"];
      message["tool_calls"] = ToolCallsJson(c.total.tool_calls);
      choice["message"] = message;
      choice["logprobs"] =
          prepared_.request.logprobs ? json{{"content", c.logprobs}} : json(nullptr);
    } else {
      choice["text"] = c.total.content;
      choice["logprobs"] = prepared_.request.logprobs ? CompletionLogprobs(c) : json(nullptr);
      if (prepared_.request.prompt_logprobs >= 0) choice["prompt_logprobs"] = c.prompt_logprobs;
    }
    choice["finish_reason"] = c.finish_reason;
    choices.push_back(std::move(choice));
  }
  json body = {{"id", id_},           {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created_}, {"model", context_->model_name},
               {"choices", choices},  {"usage", Usage()}};
  if (chat && prepared_.request.prompt_logprobs >= 0) {  // vLLM: one list, on the response
    body["prompt_logprobs"] = choices_[0].prompt_logprobs;
  }
  writer_->Send({200, "application/json", {}, Dump(body)});
}

void CompletionJob::Fail(const Status& error) {
  failed_ = true;
  Logger("server")->warn("{}: generation failed: {}", id_, error.ToString());
  for (Choice& c : choices_) {
    if (!c.service_done) context_->service->Cancel(c.seq_id);
  }
  ApiError e;
  e.message = error.ToString();
  const bool client_error = error.code() == StatusCode::kInvalidArgument ||
                            error.code() == StatusCode::kResourceExhausted;
  e.http_status = client_error ? 400 : error.code() == StatusCode::kUnavailable ? 503 : 500;
  if (!client_error) e.type = "server_error";
  context_->metrics->ObserveRequestDone(Finished("abort"));
  if (prepared_.shape) {
    if (!prepared_.request.stream) return writer_->Send(prepared_.shape->Error(e));
    prepared_.shape->StreamError(*writer_, e);
    return writer_->EndStream();
  }
  if (!prepared_.request.stream) {
    writer_->Send({e.http_status, "application/json", {}, e.ToJson()});
    return;
  }
  writer_->Write("data: " + e.ToJson() + "\n\n");
  writer_->Write("data: [DONE]\n\n");
  writer_->EndStream();
}

}  // namespace spark::engine::server
