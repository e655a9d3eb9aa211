#include "sparkctl/serving/acceptance.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "base/strings.h"
#include "sparkctl/serving/corpus.h"

namespace spark::serving {
std::string ClipText(const std::string& s, size_t n) {
  std::string out = s;
  if (out.size() > n) out = std::string(Utf8Prefix(out, n)) + "...";
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return out;
}

namespace {

using nlohmann::json;

// Thinking off for chat formats that have the switch (Qwen3's and DeepSeek's names).
const json kThinkingOff = {{"enable_thinking", false}, {"thinking", false}};
const json kThinkingOn = {{"enable_thinking", true}, {"thinking", true}};

json UserMessage(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

// Characters (code points) of UTF-8 text: JSON Schema's maxLength counts these, not bytes.
size_t Utf8Length(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

json WeatherTool() {
  return json::array({{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Current weather in a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"maxLength", 60}}}}},
                           {"required", {"city"}},
                           {"additionalProperties", false}}}}}}});
}

struct Runner {
  const Endpoint& e;
  const AcceptanceOptions& o;
  std::vector<CheckResult> results;

  void Add(CheckResult r) {
    if (o.on_result) o.on_result(r);
    results.push_back(std::move(r));
  }

  // One streamed chat request; fills latency and tok/s; false (and a failed result) on a
  // transport or HTTP error.
  bool Ask(CheckResult& r, json body, StreamResult* out) {
    body["model"] = e.model;
    Result<StreamResult> s = Stream(e, "/v1/chat/completions", std::move(body), o.timeout);
    if (!s.ok()) {
      r.verdict = Verdict::kFail;
      r.detail = s.status().message();
      return false;
    }
    *out = std::move(*s);
    r.latency_s = out->total_seconds();
    // Tokens that came together (text held until it is whole UTF-8) have no decode time of
    // their own: no rate then, rather than an inflated one.
    if (out->usage && out->decode_seconds() > 0 && out->usage->completion_tokens > 1 &&
        out->token_events >= out->usage->completion_tokens) {
      r.tokens_per_s = (out->usage->completion_tokens - 1) / out->decode_seconds();
    }
    if (out->status != 200 || !out->error.empty()) {
      r.verdict = Verdict::kFail;
      r.detail = "HTTP " + std::to_string(out->status) + ": " + out->error;
      return false;
    }
    if (!out->saw_done) {
      r.verdict = Verdict::kFail;
      r.detail = "the stream ended without data: [DONE]";
      return false;
    }
    return true;
  }

  // A content check's verdict: judged on trained weights, "not judged" on random ones.
  void Judge(CheckResult& r, bool ok, const std::string& seen) {
    r.detail = seen;
    r.verdict = o.random_weights ? Verdict::kNotJudged : ok ? Verdict::kPass : Verdict::kFail;
  }

  static std::string Clip(const std::string& s, size_t n = 80) { return ClipText(s, n); }

  void Models(int* max_model_len) {
    CheckResult r{"models", false};
    const auto start = std::chrono::steady_clock::now();
    Result<JsonReply> m = GetJson(e, "/v1/models");
    r.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!m.ok() || m->status != 200) {
      r.detail = m.ok() ? "HTTP " + std::to_string(m->status) + ": " + std::string(Utf8Prefix(m->raw, 200))
                        : m.status().message();
      return Add(r);
    }
    bool listed = false;
    if (m->body.is_object() && m->body.contains("data") && m->body["data"].is_array()) {
      for (const json& d : m->body["data"]) {
        if (d.value("id", "") != e.model) continue;
        listed = true;
        if (d.contains("max_model_len") && d["max_model_len"].is_number_integer()) {
          *max_model_len = d["max_model_len"];
        }
      }
    }
    r.verdict = listed ? Verdict::kPass : Verdict::kFail;
    r.detail =
        listed ? "lists " + e.model +
                     (*max_model_len > 0 ? ", max_model_len " + std::to_string(*max_model_len) : "")
               : "/v1/models does not list " + e.model;
    Add(r);
  }

  void Arithmetic() {
    CheckResult r{"arithmetic", true};
    StreamResult s;
    if (Ask(r,
            {{"messages", {UserMessage("What is 17 * 23? Reply with the number only.")}},
             {"temperature", 0},
             {"max_tokens", 64},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      Judge(r, s.content.find("391") != std::string::npos,
            "replied \"" + Clip(s.content) + "\"" + " (expected 391)");
    }
    Add(r);
  }

  void Code() {
    CheckResult r{"code", true};
    StreamResult s;
    if (Ask(r,
            {{"messages",
              {UserMessage("Write a Python function named add that returns the "
                           "sum of its two arguments. Reply with the code only.")}},
             {"temperature", 0},
             {"max_tokens", 256},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      const bool ok = s.content.find("def add(") != std::string::npos &&
                      s.content.find("return") != std::string::npos;
      Judge(r, ok, "replied \"" + Clip(s.content) + "\" (expected def add(...): return ...)");
    }
    Add(r);
  }

  void JsonSchema() {
    CheckResult r{"json_schema", false};
    const json schema = {{"type", "object"},
                         {"properties",
                          {{"name", {{"type", "string"}, {"maxLength", 40}}},
                           {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}}}},
                         {"required", {"name", "age"}},
                         {"additionalProperties", false}};
    StreamResult s;
    if (Ask(r,
            {{"messages", {UserMessage("Invent a person. Reply as JSON with name and age.")}},
             {"temperature", 0},
             {"max_tokens", 256},
             {"chat_template_kwargs", kThinkingOff},
             {"response_format",
              {{"type", "json_schema"},
               {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}}}},
            &s)) {
      const json doc = json::parse(s.content, nullptr, false);
      const bool ok = doc.is_object() && doc.size() == 2 && doc.contains("name") &&
                      doc["name"].is_string() && Utf8Length(doc["name"].get<std::string>()) <= 40 &&
                      doc.contains("age") && doc["age"].is_number_integer() && doc["age"] >= 0 &&
                      doc["age"] <= 150;
      r.verdict = ok ? Verdict::kPass : Verdict::kFail;
      r.detail = (ok ? "valid: "
                     : "does not follow the schema (finish_reason " + s.finish_reason + "): ") +
                 Clip(s.content);
    }
    Add(r);
  }

  void Thinking(bool on) {
    CheckResult r{on ? "thinking_on" : "thinking_off", true};
    StreamResult s;
    if (Ask(r,
            {{"messages", {UserMessage("Is 221 a prime number?")}},
             {"temperature", 0},
             {"max_tokens", 256},  // Reasoning shows in the first tokens.
             {"chat_template_kwargs", on ? kThinkingOn : kThinkingOff}},
            &s)) {
      const bool ok = on ? !s.reasoning.empty() : s.reasoning.empty() && !s.content.empty();
      Judge(r, ok,
            std::to_string(s.reasoning.size()) + " bytes of reasoning, " +
                std::to_string(s.content.size()) + " of content (expected " +
                (on ? "reasoning" : "content and no reasoning") + ")");
    }
    Add(r);
  }

  // The model picks the tool itself (content), then a forced call (protocol) whose arguments
  // must follow the schema, then the second turn with the tool's result.
  void Tools() {
    const json ask = UserMessage("What is the weather in Paris right now?");
    CheckResult chosen{"tool_call_auto", true};
    StreamResult s;
    if (Ask(chosen,
            {{"messages", {ask}},
             {"tools", WeatherTool()},
             {"temperature", 0},
             {"max_tokens", 256},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      bool ok = false;
      for (const json& c : s.tool_calls) {
        const json args = json::parse(c["arguments"].get<std::string>(), nullptr, false);
        ok = ok || (c["name"] == "get_weather" && args.is_object() && args.contains("city") &&
                    args["city"].is_string() &&
                    args["city"].get<std::string>().find("Paris") != std::string::npos);
      }
      Judge(chosen, ok,
            std::to_string(s.tool_calls.size()) + " call(s): " +
                Clip(s.tool_calls.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                     120) +
                " (expected get_weather(Paris))");
    }
    Add(chosen);

    CheckResult forced{"tool_call", false};
    json call;
    if (Ask(forced,
            {{"messages", {ask}},
             {"tools", WeatherTool()},
             {"tool_choice", "required"},
             {"temperature", 0},
             {"max_tokens", 256},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      bool ok = s.tool_calls.size() >= 1 && s.finish_reason == "tool_calls";
      if (ok) {
        call = s.tool_calls[0];
        const json args = json::parse(call["arguments"].get<std::string>(), nullptr, false);
        ok = call["name"] == "get_weather" && args.is_object() && args.size() == 1 &&
             args.contains("city") && args["city"].is_string();
      }
      forced.verdict = ok ? Verdict::kPass : Verdict::kFail;
      forced.detail =
          (ok ? "" : "expected one get_weather call with a string city, got ") +
          Clip(s.tool_calls.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 120) +
          ", finish_reason " + s.finish_reason;
    }
    Add(forced);

    CheckResult second{"tool_second_turn", false};
    if (call.is_null()) {
      second.detail = "no call from tool_call to answer";
      return Add(second);
    }
    const std::string id =
        call["id"].get<std::string>().empty() ? "call_0" : call["id"].get<std::string>();
    const json messages = {
        ask,
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", id},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", call["arguments"]}}}}}}},
        {{"role", "tool"},
         {"tool_call_id", id},
         {"content", R"({"temperature_c": 22, "sky": "clear"})"}}};
    if (Ask(second,
            {{"messages", messages},
             {"tools", WeatherTool()},
             {"temperature", 0},
             {"max_tokens", 256},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      const bool replied =
          !s.finish_reason.empty() && (!s.content.empty() || !s.tool_calls.empty());
      second.verdict = replied ? Verdict::kPass : Verdict::kFail;
      second.detail = "replied \"" + Clip(s.content) + "\", finish_reason " + s.finish_reason;
      CheckResult uses{"tool_result_used", true};
      uses.latency_s = second.latency_s;
      uses.tokens_per_s = second.tokens_per_s;
      Judge(uses, s.content.find("22") != std::string::npos,
            "replied \"" + Clip(s.content) + "\" (expected it to say 22 degrees)");
      Add(second);
      return Add(uses);
    }
    Add(second);
  }

  void Streaming() {
    CheckResult r{"streaming_usage", false};
    StreamResult s;
    if (Ask(r,
            {{"messages", {UserMessage("Count from 1 to 50.")}},
             {"temperature", 0},
             {"max_tokens", 32},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      const bool ok = s.usage && s.usage->completion_tokens >= 1 &&
                      s.usage->completion_tokens <= 32 && s.usage->prompt_tokens > 0 &&
                      s.token_events >= 1 && !s.finish_reason.empty();
      r.verdict = ok ? Verdict::kPass : Verdict::kFail;
      r.detail = s.usage ? std::to_string(s.token_events) + " token events, usage " +
                               std::to_string(s.usage->prompt_tokens) + " prompt + " +
                               std::to_string(s.usage->completion_tokens) +
                               " completion tokens, TTFT " + Seconds(s.ttft_seconds())
                         : "no usage chunk (stream_options.include_usage)";
    }
    Add(r);
  }

  static std::string Seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", s);
    return buf;
  }

  void LongPrompt(int max_model_len) {
    CheckResult protocol{"long_prompt", false};
    int target = o.long_prompt_tokens > 0
                     ? o.long_prompt_tokens
                     : std::min(8000, max_model_len > 0 ? max_model_len / 2 : 8000);
    std::mt19937_64 rng(std::random_device{}());
    const std::string word = "zebra" + std::to_string(rng() % 90000 + 10000);
    // About 4 characters a token for English prose.
    const std::string text = "The secret word is " + word + ". Remember it.\n\n" +
                             CorpusText(rng() % Corpus().size(), static_cast<size_t>(target) * 4) +
                             "\n\nWhat is the secret word given at the start? Reply with the word "
                             "only.";
    StreamResult s;
    if (Ask(protocol,
            {{"messages", {UserMessage(text)}},
             {"temperature", 0},
             {"max_tokens", 32},
             {"chat_template_kwargs", kThinkingOff}},
            &s)) {
      const int got = s.usage ? s.usage->prompt_tokens : 0;
      protocol.verdict = got >= target / 2 ? Verdict::kPass : Verdict::kFail;
      protocol.detail = std::to_string(got) + " prompt tokens (aimed at " + std::to_string(target) +
                        "), TTFT " + Seconds(s.ttft_seconds());
      CheckResult recall{"long_prompt_recall", true};
      recall.latency_s = protocol.latency_s;
      recall.tokens_per_s = protocol.tokens_per_s;
      Judge(recall, s.content.find(word) != std::string::npos,
            "replied \"" + Clip(s.content) + "\" (expected " + word + ")");
      Add(protocol);
      return Add(recall);
    }
    Add(protocol);
  }

  void Concurrent() {
    CheckResult r{"concurrent", false};
    const int n = std::max(1, o.concurrency);
    std::vector<Result<StreamResult>> out(n, InternalError("not run"));
    std::vector<std::thread> threads;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        json body = {
            {"model", e.model},
            {"messages", {UserMessage("Request " + std::to_string(i) + ": list three colours.")}},
            {"temperature", 0},
            {"max_tokens", 32},
            {"chat_template_kwargs", kThinkingOff}};
        out[i] = Stream(e, "/v1/chat/completions", body, o.timeout);
      });
    }
    for (auto& t : threads) t.join();
    r.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int ok = 0, tokens = 0;
    std::string first_error;
    for (const auto& s : out) {
      const bool good = s.ok() && s->status == 200 && s->error.empty() && s->saw_done && s->usage;
      if (good) {
        ++ok;
        tokens += s->usage->completion_tokens;
      } else if (first_error.empty()) {
        first_error =
            s.ok() ? "HTTP " + std::to_string(s->status) + ": " + s->error : s.status().message();
      }
    }
    r.tokens_per_s = r.latency_s > 0 ? tokens / r.latency_s : 0;
    r.verdict = ok == n ? Verdict::kPass : Verdict::kFail;
    r.detail = std::to_string(ok) + "/" + std::to_string(n) + " streams complete, " +
               std::to_string(tokens) + " tokens" + (first_error.empty() ? "" : "; " + first_error);
    Add(r);
  }
};

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotJudged:
      return "not judged (random weights)";
    case Verdict::kNoReference:
      return "no reference";
  }
  return "";
}

std::vector<CheckResult> RunAcceptance(const Endpoint& endpoint, const AcceptanceOptions& options) {
  Runner r{endpoint, options, {}};
  int max_model_len = 0;
  r.Models(&max_model_len);
  r.Arithmetic();
  r.Code();
  r.JsonSchema();
  r.Thinking(true);
  r.Thinking(false);
  r.Tools();
  r.Streaming();
  r.LongPrompt(max_model_len);
  r.Concurrent();
  return r.results;
}

bool AllPassed(const std::vector<CheckResult>& results) {
  return std::none_of(results.begin(), results.end(),
                      [](const CheckResult& r) { return r.verdict == Verdict::kFail; });
}

nlohmann::ordered_json AcceptanceJson(const Endpoint& endpoint, const AcceptanceOptions& options,
                                      const std::vector<CheckResult>& results) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const CheckResult& r : results) {
    checks.push_back({{"name", r.name},
                      {"kind", r.content ? "content" : "protocol"},
                      {"verdict", VerdictName(r.verdict)},
                      {"latency_s", r.latency_s},
                      {"tokens_per_s", r.tokens_per_s},
                      {"detail", r.detail}});
  }
  return {{"schema", kCheckSchema},       {"endpoint", endpoint.url.text},
          {"model", endpoint.model},      {"random_weights", options.random_weights},
          {"passed", AllPassed(results)}, {"checks", checks}};
}

std::string AcceptanceTable(const std::vector<CheckResult>& results) {
  std::string out =
      "check               kind      verdict                        latency   tok/s  "
      "detail\n";
  for (const CheckResult& r : results) {
    char line[160];
    std::snprintf(line, sizeof line, "%-19s %-9s %-30s %7ss %7s  ", r.name.c_str(),
                  r.content ? "content" : "protocol", VerdictName(r.verdict),
                  Fixed(r.latency_s, 2).c_str(),
                  r.tokens_per_s > 0 ? Fixed(r.tokens_per_s, 1).c_str() : "-");
    out += line + r.detail + "\n";
  }
  return out;
}

}  // namespace spark::serving
