// OpenAIServer over a FakeService and the ByteCodec, driven by a real HTTP client on 127.0.0.1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/server/openai_server.h"
#include "tests/engine/server/fake_service.h"
#include "tests/engine/server/http_test_client.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using testing::ClientResponse;
using testing::FakeService;
using testing::HttpCall;
using testing::SseData;

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(OpenAIServerOptions options = {}, testing::FakeOptions fake = {}) {
    service_ = std::make_unique<FakeService>(
        fake,
        [this](const std::vector<int32_t>& ids) {
          std::string s;
          for (int32_t t : ids) s += codec_.TokenText(t);
          return s;
        },
        [this](const std::string& text) { return codec_.Encode(text, false); });
    options.http.port = 0;
    options.served_model_name = "fake";
    auto server = OpenAIServer::Start(options, service_.get(), &codec_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void SetUp() override { StartServer(); }
  void TearDown() override {
    server_.reset();
    service_.reset();
  }

  ClientResponse Post(const std::string& target, const json& body,
                      const std::map<std::string, std::string>& headers = {}) {
    return HttpCall(server_->port(), "POST", target, body.dump(), headers);
  }
  static json Chat(const std::string& text, json extra = json::object()) {
    json body = {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    return body;
  }

  ByteCodec codec_;
  std::unique_ptr<FakeService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(ServerTest, HealthAndModels) {
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 200);
  ClientResponse r = HttpCall(server_->port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.error;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "fake");
  EXPECT_EQ(j["data"][0]["max_model_len"], 4096);
}

TEST_F(ServerTest, ChatNonStreaming) {
  ClientResponse r = Post("/v1/chat/completions", Chat("hi"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello! I am a fake model.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 26);  // 25 bytes + EOS
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<int>(),
            static_cast<int>(codec_
                                 .Encode(*codec_.RenderChat(*tokenizer::ParseChatRequest(
                                             nlohmann::ordered_json::parse(Chat("hi").dump()))),
                                         false)
                                 .size()));
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // The same prompt again: the fake reports a prefix-cache hit.
  json again = json::parse(Post("/v1/chat/completions", Chat("hi")).body);
  EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(ServerTest, ChatStreamingChunksAndUsage) {
  ClientResponse r =
      Post("/v1/chat/completions",
           Chat("hi", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  std::vector<std::string> data = SseData(r.body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  json first = json::parse(data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["usage"].is_null());
  std::string text;
  std::string finish;
  for (size_t i = 1; i + 2 < data.size(); ++i) {
    json c = json::parse(data[i]);
    text += c["choices"][0]["delta"].value("content", "");
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "Hello! I am a fake model.");
  EXPECT_EQ(finish, "stop");
  json usage = json::parse(data[data.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 26);
}

TEST_F(ServerTest, CompletionsWithStopStringAndMaxTokens) {
  json body = {{"model", "fake"}, {"prompt", "say hi"}, {"stop", "fake"}, {"max_tokens", 50}};
  json j = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hello! I am a ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  body = {{"model", "fake"}, {"prompt", "say hi"}, {"max_tokens", 5}};
  j = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(service_->num_active(), 0);
}

TEST_F(ServerTest, NChoicesAndLogprobs) {
  json j = json::parse(
      Post("/v1/chat/completions",
           Chat("hi", {{"n", 3}, {"logprobs", true}, {"top_logprobs", 2}, {"max_tokens", 3}}))
          .body);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["message"]["content"], "Hel");
    const json& lp = j["choices"][i]["logprobs"]["content"];
    ASSERT_EQ(lp.size(), 3u);
    EXPECT_EQ(lp[0]["token"], "H");
    EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.25f);
    EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 9);
}

TEST_F(ServerTest, ReasoningSplitNonStreamingAndStreaming) {
  json j = json::parse(Post("/v1/chat/completions", Chat("think about 2+2")).body);
  const json& m = j["choices"][0]["message"];
  // The whitespace the model wrote around the think block stays (as vLLM returns it).
  EXPECT_EQ(m["reasoning_content"], "\nThe user wants 2+2. That is 4.\n");
  EXPECT_EQ(m["reasoning"], m["reasoning_content"]);
  EXPECT_EQ(m["content"], "\n\nThe answer is 4.");
  ClientResponse r = Post("/v1/chat/completions", Chat("think about 2+2", {{"stream", true}}));
  std::string reasoning, content;
  for (const std::string& d : SseData(r.body)) {
    if (d == "[DONE]") break;
    const json delta = json::parse(d)["choices"][0]["delta"];
    reasoning += delta.value("reasoning_content", "");
    content += delta.value("content", "");
  }
  EXPECT_EQ(reasoning, "\nThe user wants 2+2. That is 4.\n");
  EXPECT_EQ(content, "\n\nThe answer is 4.");
}

json WeatherTools() {
  return json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}},
       {{"type", "function"},
        {"function", {{"name", "now"}, {"parameters", {{"type", "object"}}}}}}});
}

// The tool_calls a streaming client rebuilds; checks vLLM's chunk shapes on the way: the first
// piece of a call has index, id, type "function", the name and arguments "", later pieces only
// index and an argument fragment.
json ReassembleToolCalls(const std::string& sse, std::string* content, std::string* finish) {
  json calls = json::array();
  for (const std::string& d : SseData(sse)) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    const json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) *content += delta["content"];
    if (!delta.contains("tool_calls")) continue;
    EXPECT_EQ(delta["tool_calls"].size(), 1u) << d;
    const json& piece = delta["tool_calls"][0];
    const size_t index = piece["index"];
    if (index == calls.size()) {  // First piece of a call.
      EXPECT_TRUE(piece["id"].is_string()) << d;
      EXPECT_EQ(piece["type"], "function") << d;
      EXPECT_EQ(piece["function"]["arguments"], "") << d;
      calls.push_back(
          {{"id", piece["id"]}, {"name", piece["function"]["name"]}, {"arguments", ""}});
    } else {
      EXPECT_EQ(index + 1, calls.size()) << d;
      EXPECT_FALSE(piece.contains("id")) << d;
      EXPECT_FALSE(piece["function"].contains("name")) << d;
      calls[index]["arguments"] = calls[index]["arguments"].get<std::string>() +
                                  piece["function"]["arguments"].get<std::string>();
    }
  }
  return calls;
}

TEST_F(ServerTest, ToolCallParsedNonStreamingAndStreaming) {
  json j = json::parse(
      Post("/v1/chat/completions", Chat("weather in Paris?", {{"tools", WeatherTools()}})).body);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  const std::string args = choice["message"]["tool_calls"][0]["function"]["arguments"];
  EXPECT_EQ(args, "{\"city\": \"Paris\"}");
  ClientResponse r = Post("/v1/chat/completions",
                          Chat("weather in Paris?", {{"tools", WeatherTools()}, {"stream", true}}));
  std::string content, finish;
  json calls = ReassembleToolCalls(r.body, &content, &finish);
  ASSERT_EQ(calls.size(), 1u) << r.body;
  EXPECT_EQ(calls[0]["name"], "get_weather");
  EXPECT_EQ(calls[0]["arguments"], args);  // Fragments add up to the non-streamed arguments.
  EXPECT_EQ(content, "");
  EXPECT_EQ(finish, "tool_calls");
  // The ByteCodec streams one byte per token: the arguments came in many fragments.
  size_t fragments = 0;
  for (const std::string& d : SseData(r.body)) {
    if (d == "[DONE]") break;
    const json delta = json::parse(d)["choices"][0]["delta"];
    fragments += delta.contains("tool_calls") && !delta["tool_calls"][0].contains("id");
  }
  EXPECT_GE(fragments, 10u);
  // tool_choice none: the markup stays plain content.
  j = json::parse(Post("/v1/chat/completions",
                       Chat("weather?", {{"tools", WeatherTools()}, {"tool_choice", "none"}}))
                      .body);
  EXPECT_TRUE(j["choices"][0]["message"]["tool_calls"].empty());
  EXPECT_NE(j["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>"),
            std::string::npos);
}

// "required" and a named function prefill the start of a call; the model (here: the fake)
// continues it, and the result is parsed like any call, streamed or not.
TEST_F(ServerTest, ToolChoiceRequiredAndNamedForceACall) {
  const std::vector<json> choices = {
      "required", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}};
  for (const json& tool_choice : choices) {
    json body = Chat("hello there", {{"tools", WeatherTools()}, {"tool_choice", tool_choice}});
    ClientResponse r = Post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    const json& message = j["choices"][0]["message"];
    ASSERT_EQ(message["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    body["stream"] = true;
    std::string content, finish;
    json calls = ReassembleToolCalls(Post("/v1/chat/completions", body).body, &content, &finish);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]["name"], "get_weather");
    EXPECT_EQ(calls[0]["arguments"], "{\"city\": \"Paris\"}");
    EXPECT_EQ(finish, "tool_calls");
  }
}

// A forced call the model did not complete is an error a client can act on (400, as vLLM
// answers a reply that does not validate), streamed as an error event.
TEST_F(ServerTest, ForcedCallThatDoesNotComeOutIsAnError) {
  const std::vector<json> choices = {
      "required", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}};
  for (const json& tool_choice : choices) {
    json body = Chat("nocall please", {{"tools", WeatherTools()}, {"tool_choice", tool_choice}});
    ClientResponse r = Post("/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_NE(e["message"].get<std::string>().find("not a valid tool call"), std::string::npos)
        << e;
    body["stream"] = true;
    r = Post("/v1/chat/completions", body);
    std::vector<std::string> events = SseData(r.body);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_TRUE(json::parse(events[events.size() - 2]).contains("error")) << r.body;
  }
}

TEST_F(ServerTest, ToolChoiceNeedsToolsAndAKnownFunction) {
  ClientResponse r = Post("/v1/chat/completions", Chat("hi", {{"tool_choice", "required"}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tool_choice") << r.body;
  r = Post("/v1/chat/completions",
           Chat("hi", {{"tools", WeatherTools()},
                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}));
  EXPECT_EQ(r.status, 400);
  json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "tool_choice");
  EXPECT_NE(e["message"].get<std::string>().find("'nope' is not among `tools` (get_weather, now)"),
            std::string::npos)
      << e;
}

struct BadRequestCase {
  std::string target;
  std::string body;
  std::string param;
};

TEST_F(ServerTest, BadRequestsNameTheField) {
  const std::string long_prompt(5000, 'x');
  const std::vector<BadRequestCase> cases = {
      {"/v1/chat/completions", "{not json", ""},
      {"/v1/chat/completions", R"({"model": "fake"})", "messages"},
      {"/v1/chat/completions",
       R"({"model": "other", "messages": [{"role": "user", "content": "x"}]})", "model"},
      {"/v1/chat/completions", R"({"model": 3, "messages": []})", "model"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})",
       "temperature"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "temperature": 9})",
       "temperature"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "n": 0})", "n"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})",
       "max_tokens"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5000})",
       "max_tokens"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "wizard", "content": "x"}]})",
       "messages[0].role"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
      // Images (DeepSeek-V4.1's vision inputs): refused, the engine serves text only.
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": [{"type": "image_url",
           "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})",
       "messages[0].content[0]"},
      {"/v1/chat/completions",
       R"({"model": "fake", "messages": [{"role": "user", "content": "x"}], "stream": "yes"})",
       "stream"},
      {"/v1/completions", R"({"model": "fake", "prompt": ")" + long_prompt + R"("})", "prompt"},
      {"/v1/completions", R"({"model": "fake", "prompt": [1, 99999]})", "prompt"},
      {"/v1/completions", R"({"model": "fake"})", "prompt"},
      {"/v1/completions", R"({"model": "fake", "prompt": "x", "logprobs": 99})", "logprobs"},
  };
  for (const BadRequestCase& c : cases) {
    ClientResponse r = HttpCall(server_->port(), "POST", c.target, c.body);
    ASSERT_EQ(r.status, 400) << c.body << " -> " << r.body;
    json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error") << c.body;
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    if (c.param.empty()) {
      EXPECT_TRUE(e["param"].is_null()) << c.body;
    } else {
      EXPECT_EQ(e["param"], c.param) << c.body << " -> " << r.body;
    }
  }
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/v1/nothing").status, 404);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/v1/chat/completions").status, 405);
}

TEST_F(ServerTest, OversizedBodyAndHeaders) {
  const std::string big(9 * 1024 * 1024, 'x');
  EXPECT_EQ(HttpCall(server_->port(), "POST", "/v1/completions", big).status, 413);
  ClientResponse r =
      HttpCall(server_->port(), "GET", "/health", "", {{"X-Big", std::string(20000, 'a')}});
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 200);
}

// The value of the sample line starting with `prefix` (-1 when absent).
double MetricValue(const std::string& text, const std::string& prefix) {
  const size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  const size_t sp = text.find(' ', at + 1 + prefix.size());
  return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
}

TEST_F(ServerTest, MetricsUseVllmNames) {
  Post("/v1/chat/completions", Chat("hi"));
  ClientResponse r = HttpCall(server_->port(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"].find("text/plain; version=0.0.4"), 0u);
  const std::string l = "{model_name=\"fake\",engine=\"0\"";
  for (const std::string& name :
       {"vllm:num_requests_running" + l + "}", "vllm:num_requests_waiting" + l,
        "vllm:kv_cache_usage_perc" + l, "vllm:prompt_tokens_total" + l,
        "vllm:generation_tokens_total" + l + "} 26.0",
        "vllm:request_success_total" + l + ",finished_reason=\"stop\"} 1.0",
        "vllm:time_to_first_token_seconds_bucket" + l + ",le=\"+Inf\"} 1.0",
        "vllm:inter_token_latency_seconds_count" + l + "} 25.0",
        "vllm:e2e_request_latency_seconds_count" + l + "} 1.0",
        "vllm:request_generation_tokens_count" + l + "} 1.0",
        std::string("# TYPE vllm:prefix_cache_queries_total counter"),
        std::string("# TYPE vllm:generation_tokens_total counter"),
        "vllm:prefix_cache_hits_total" + l}) {
    EXPECT_NE(r.body.find(name), std::string::npos) << name << "\n" << r.body;
  }
}

// Counters and histogram counts move with each request, by what the request did.
TEST_F(ServerTest, MetricsCountersMoveWithRequests) {
  const std::string l = "{model_name=\"fake\",engine=\"0\"";
  const std::string before = "\n" + HttpCall(server_->port(), "GET", "/metrics").body;
  json j = json::parse(Post("/v1/chat/completions", Chat("hi", {{"max_tokens", 5}})).body);
  const int prompt = j["usage"]["prompt_tokens"], completion = j["usage"]["completion_tokens"];
  ASSERT_EQ(completion, 5);
  const std::string after = "\n" + HttpCall(server_->port(), "GET", "/metrics").body;
  auto delta = [&](const std::string& prefix) {
    return MetricValue(after, prefix) - MetricValue(before, prefix);
  };
  EXPECT_EQ(delta("vllm:prompt_tokens_total" + l + "}"), prompt);
  EXPECT_EQ(delta("vllm:generation_tokens_total" + l + "}"), 5);
  EXPECT_EQ(delta("vllm:request_success_total" + l + ",finished_reason=\"length\"}"), 1);
  EXPECT_EQ(delta("vllm:request_success_total" + l + ",finished_reason=\"stop\"}"), 0);
  EXPECT_EQ(delta("vllm:e2e_request_latency_seconds_count" + l + "}"), 1);
  EXPECT_EQ(delta("vllm:request_params_max_tokens_count" + l + "}"), 1);
  EXPECT_EQ(delta("vllm:inter_token_latency_seconds_count" + l + "}"), 4);
}

TEST_F(ServerTest, ClientDisconnectCancels) {
  server_.reset();
  service_.reset();
  testing::FakeOptions slow;
  slow.token_delay = std::chrono::milliseconds(5);
  StartServer({}, slow);
  ASSERT_TRUE(testing::StartAndDisconnect(server_->port(), "/v1/chat/completions",
                                          Chat("long story", {{"stream", true}}).dump(), 300));
  for (int i = 0; i < 200 && service_->num_cancelled() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(service_->num_cancelled(), 1);
  EXPECT_EQ(service_->num_active(), 0);
  for (int i = 0; i < 100 && server_->active_sequences() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->active_sequences(), 0);
}

TEST_F(ServerTest, QueueFullAnswers429WithRetryAfter) {
  server_.reset();
  service_.reset();
  OpenAIServerOptions options;
  options.max_pending_sequences = 2;
  testing::FakeOptions slow;
  slow.token_delay = std::chrono::milliseconds(5);
  StartServer(options, slow);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0}, busy{0};
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      ClientResponse r = Post("/v1/chat/completions", Chat("long story", {{"max_tokens", 100}}));
      if (r.status == 200) ++ok;
      if (r.status == 429) {
        ++busy;
        EXPECT_EQ(r.headers["retry-after"], "1");
        EXPECT_EQ(json::parse(r.body)["error"]["code"], "rate_limit_exceeded");
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok + busy, 6);
  EXPECT_GE(busy, 1);
  EXPECT_GE(ok, 2);
}

// A batch of prompts holds n sequences per prompt: the queue counts each, and gives each back.
TEST_F(ServerTest, BatchedPromptsCountEverySequence) {
  server_.reset();
  service_.reset();
  OpenAIServerOptions options;
  options.max_pending_sequences = 3;
  StartServer(options);
  const json batch = {{"model", "fake"}, {"prompt", {{1, 2}, {3, 4}}}, {"max_tokens", 2},
                      {"n", 2}};
  ClientResponse r = Post("/v1/completions", batch);
  EXPECT_EQ(r.status, 429) << "2 prompts x n=2 is 4 sequences, above 3: " << r.body;
  json smaller = batch;
  smaller["n"] = 1;
  r = Post("/v1/completions", smaller);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"].size(), 2u);
  for (int i = 0; i < 100 && server_->active_sequences() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->active_sequences(), 0);
}

TEST_F(ServerTest, ReadyRunsACanaryAndReportsFailures) {
  ClientResponse r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 200) << r.body;
  const uint64_t submitted = service_->num_submitted();
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/ready").status, 200);
  EXPECT_EQ(service_->num_submitted(), submitted);  // Cached.

  server_.reset();
  OpenAIServerOptions options;
  options.ready_cache = std::chrono::milliseconds(0);
  options.ready_timeout = std::chrono::milliseconds(300);
  options.http.port = 0;
  options.served_model_name = "fake";
  server_ = std::move(*OpenAIServer::Start(options, service_.get(), &codec_));
  service_->SetBroken(UnavailableError("rank 1: all-reduce: peer closed the connection"));
  r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("rank 1"), std::string::npos) << r.body;
  service_->SetBroken(Status::Ok());
  service_->SetHung(true);
  r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("hung"), std::string::npos) << r.body;
  service_->SetHung(false);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/ready").status, 200);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 200);
}

// A canary stuck behind a step that is still running answers "busy" (200), not "hung"; once the
// step has run past ready_step_timeout it is a hang again.
TEST_F(ServerTest, ReadyTellsBusyFromHung) {
  server_.reset();
  OpenAIServerOptions options;
  options.ready_cache = std::chrono::milliseconds(0);
  options.ready_timeout = std::chrono::milliseconds(300);
  options.ready_busy_after = std::chrono::milliseconds(50);
  options.ready_step_timeout = std::chrono::milliseconds(5000);
  options.http.port = 0;
  options.served_model_name = "fake";
  server_ = std::move(*OpenAIServer::Start(options, service_.get(), &codec_));
  service_->SetHung(true);
  ServiceStats busy;
  busy.step_seconds = 1.0;  // a long prefill chunk, running
  service_->SetEngineStats(busy);
  ClientResponse r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).value("busy", false), true) << r.body;
  // Still busy after the canary's own timeout: the step goes on.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/ready").status, 200);
  ServiceStats stalled;
  stalled.step_seconds = 6.0;  // past ready_step_timeout
  service_->SetEngineStats(stalled);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("hung"), std::string::npos) << r.body;
  service_->SetHung(false);
  service_->SetEngineStats({});
}

TEST_F(ServerTest, ReadyIs503WhileTheMemoryGuardHoldsAdmission) {
  ServiceStats low;
  runtime::MemoryGuardStatus g;
  g.state = runtime::GuardState::kNoAdmit;
  g.known = true;
  g.available_bytes = int64_t{2} << 30;
  g.rank = 1;
  g.admit_floor_bytes = int64_t{3} << 30;
  low.memory_guard = g;
  service_->SetEngineStats(low);
  const uint64_t submitted = service_->num_submitted();
  ClientResponse r = HttpCall(server_->port(), "GET", "/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("memory guard no-admit: 2.00 GiB available on rank 1's node (admit floor "
                        "3.00 GiB)"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(service_->num_submitted(), submitted) << "no canary while admission is held";
  const std::string metrics = HttpCall(server_->port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("spark:memory_guard_state{model_name=\"fake\",engine=\"0\",state=\""
                         "no-admit\"} 1.0"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("spark:memory_available_bytes{model_name=\"fake\",engine=\"0\"} "
                         "2147483648.0"),
            std::string::npos)
      << metrics;
  service_->SetEngineStats({});
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/ready").status, 200);
}

TEST_F(ServerTest, ApiKeyRequiredWhenConfigured) {
  server_.reset();
  OpenAIServerOptions options;
  options.api_keys = *ApiKeys::FromKeys({"sk-test-0123456789abcdef"});
  StartServer(options);
  EXPECT_EQ(Post("/v1/chat/completions", Chat("hi")).status, 401);
  EXPECT_EQ(
      Post("/v1/chat/completions", Chat("hi"), {{"Authorization", "Bearer wrong-key-0123456789"}})
          .status,
      401);
  ClientResponse r = Post("/v1/chat/completions", Chat("hi"),
                          {{"Authorization", "Bearer sk-test-0123456789abcdef"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 200);  // Probes stay open.
}

TEST(ServerStartTest, NonLoopbackNeedsAnApiKey) {
  ByteCodec codec;
  FakeService service(
      {}, [](const auto&) { return std::string(); },
      [](const std::string&) { return std::vector<int32_t>{}; });
  OpenAIServerOptions options;
  options.http.host = "0.0.0.0";
  options.http.port = 0;
  auto server = OpenAIServer::Start(options, &service, &codec);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(server.status().message().find("API key"), std::string::npos);
}

TEST_F(ServerTest, DrainWaitsForRunningStreams) {
  server_.reset();
  service_.reset();
  testing::FakeOptions slow;
  slow.token_delay = std::chrono::milliseconds(2);
  StartServer({}, slow);
  ClientResponse result;
  std::thread client([&] {
    result =
        Post("/v1/chat/completions", Chat("long story", {{"stream", true}, {"max_tokens", 300}}));
  });
  while (server_->active_sequences() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(server_->Drain(std::chrono::seconds(20)).ok());
  server_->Stop();  // Right away, as the serve command does: the stream must be complete.
  client.join();
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(SseData(result.body).back(), "[DONE]");
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 0);  // No longer listening.
}

}  // namespace
}  // namespace spark::engine::server
