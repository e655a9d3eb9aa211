// /v1/messages, /v1/messages/count_tokens and /v1/responses end to end over a FakeService and the
// ByteCodec (Qwen3 markers), through a real HTTP client: the response objects, the stream event
// sequences, forced tool calls, thinking, errors in each API's shape and x-api-key.
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

struct Event {
  std::string name;
  json data;
};

// An SSE body as (event name, data) pairs.
std::vector<Event> Events(const std::string& body) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string block = body.substr(at, end - at);
    at = end + 2;
    Event e;
    size_t line_at = 0;
    while (line_at < block.size()) {
      size_t nl = block.find('\n', line_at);
      if (nl == std::string::npos) nl = block.size();
      const std::string line = block.substr(line_at, nl - line_at);
      line_at = nl + 1;
      if (line.starts_with("event: ")) e.name = line.substr(7);
      if (line.starts_with("data: ")) e.data = json::parse(line.substr(6));
    }
    if (!e.name.empty() || !e.data.is_null()) out.push_back(std::move(e));
  }
  return out;
}

json WeatherTool() {
  return {{"name", "get_weather"},
          {"description", "weather"},
          {"input_schema",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}}}}},
            {"required", {"city"}}}}};
}

class ClientApiServerTest : public ::testing::Test {
 protected:
  void StartServer(OpenAIServerOptions options = {}) {
    server_.reset();
    service_ = std::make_unique<FakeService>(
        testing::FakeOptions{},
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
  static json Message(const std::string& text, json extra = json::object()) {
    json body = {{"model", "fake"},
                 {"max_tokens", 200},
                 {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    return body;
  }

  ByteCodec codec_;
  std::unique_ptr<FakeService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(ClientApiServerTest, MessagesReturnsAnthropicsMessageObject) {
  const ClientResponse r = Post("/v1/messages", Message("hello"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "fake");
  EXPECT_TRUE(j["id"].get<std::string>().starts_with("msg_"));
  ASSERT_EQ(j["content"].size(), 1u) << r.body;
  EXPECT_EQ(j["content"][0], (json{{"type", "text"}, {"text", "Hello! I am a fake model."}}));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["output_tokens"], 26);  // 25 bytes and the end-of-turn token.
  EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 5);
}

TEST_F(ClientApiServerTest, MessagesStopSequenceAndMaxTokens) {
  json j = json::parse(Post("/v1/messages", Message("hello", {{"stop_sequences", {"fake"}}})).body);
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "fake");
  EXPECT_EQ(j["content"][0]["text"], "Hello! I am a ");
  j = json::parse(Post("/v1/messages", Message("hello", {{"max_tokens", 3}})).body);
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_EQ(j["usage"]["output_tokens"], 3);
}

TEST_F(ClientApiServerTest, MessagesToolUseAndToolResultTurn) {
  json body = Message("weather in Paris?", {{"tools", {WeatherTool()}}});
  json j = json::parse(Post("/v1/messages", body).body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  const json call = j["content"][0];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], (json{{"city", "Paris"}}));
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("toolu_"));
  body["messages"].push_back({{"role", "assistant"}, {"content", j["content"]}});
  body["messages"].push_back(
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", call["id"]}, {"content", "22"}}}}});
  j = json::parse(Post("/v1/messages", body).body);
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_EQ(j["content"][0]["text"], "It is 22 degrees in Paris.");
}

TEST_F(ClientApiServerTest, MessagesForcedToolCall) {
  const json body = Message(
      "hello",
      {{"tools", {WeatherTool()}}, {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}});
  const json j = json::parse(Post("/v1/messages", body).body);
  EXPECT_EQ(j["stop_reason"], "tool_use") << j.dump();
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  EXPECT_EQ(j["content"][0]["input"], (json{{"city", "Paris"}}));
}

TEST_F(ClientApiServerTest, MessagesThinkingBlocks) {
  const json j = json::parse(
      Post("/v1/messages",
           Message("think: 2+2?", {{"max_tokens", 2000},
                                   {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}))
          .body);
  ASSERT_EQ(j["content"].size(), 2u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  EXPECT_NE(j["content"][0]["thinking"].get<std::string>().find("That is 4."), std::string::npos);
  EXPECT_EQ(j["content"][1]["type"], "text");
  EXPECT_NE(j["content"][1]["text"].get<std::string>().find("The answer is 4."), std::string::npos);
}

TEST_F(ClientApiServerTest, MessagesStreamFollowsTheDocumentedEventSequence) {
  const ClientResponse r =
      Post("/v1/messages", Message("think: then weather?",
                                   {{"stream", true},
                                    {"tools", {WeatherTool()}},
                                    {"max_tokens", 2000},
                                    {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Event> events = Events(r.body);
  ASSERT_GE(events.size(), 6u) << r.body;
  EXPECT_EQ(events[0].name, "message_start");
  EXPECT_EQ(events[0].data["message"]["content"], json::array());
  EXPECT_EQ(events[1].name, "ping");
  EXPECT_EQ(events[events.size() - 2].name, "message_delta");
  EXPECT_EQ(events.back().name, "message_stop");
  // Blocks open, get deltas and close in order, with consecutive indices.
  std::vector<json> blocks;
  int open = -1;
  std::string arguments;
  for (const Event& e : events) {
    EXPECT_EQ(e.name, e.data["type"]) << e.data.dump();
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1);
      open = e.data["index"];
      EXPECT_EQ(open, static_cast<int>(blocks.size()));
      blocks.push_back(e.data["content_block"]);
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], open);
      const json& d = e.data["delta"];
      if (d["type"] == "input_json_delta") arguments += d["partial_json"].get<std::string>();
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data["index"], open);
      open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  ASSERT_GE(blocks.size(), 1u);
  EXPECT_EQ(blocks.back()["type"], "tool_use") << r.body;
  EXPECT_EQ(json::parse(arguments), (json{{"city", "Paris"}}));
  const json& delta = events[events.size() - 2].data;
  EXPECT_EQ(delta["delta"]["stop_reason"], "tool_use");
  EXPECT_GT(delta["usage"]["output_tokens"].get<int>(), 10);
}

TEST_F(ClientApiServerTest, MessagesErrorsHaveAnthropicsShape) {
  ClientResponse r = Post("/v1/messages", Message("hi", {{"frequency_penalty", 1}}));
  ASSERT_EQ(r.status, 400);
  json j = json::parse(r.body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("frequency_penalty"), std::string::npos);
  // Found after translation, named as the client sent it.
  r = Post("/v1/messages", Message("hi", {{"stop_sequences", {""}}}));
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(
      json::parse(r.body)["error"]["message"].get<std::string>().starts_with("stop_sequences:"))
      << r.body;
  r = Post("/v1/messages", Message("hi", {{"model", "claude-opus"}}));
  ASSERT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("claude-opus"), std::string::npos);
  r = HttpCall(server_->port(), "GET", "/v1/messages");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(json::parse(r.body)["type"], "error");
  r = Post("/v1/messages/batches", Message("hi"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "not_found_error") << r.body;
}

TEST_F(ClientApiServerTest, CountTokensMatchesTheMessagesPrompt) {
  json body = Message("hello");
  body.erase("max_tokens");
  const ClientResponse r = Post("/v1/messages/count_tokens", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json full = json::parse(Post("/v1/messages", Message("hello")).body);
  EXPECT_EQ(json::parse(r.body)["input_tokens"],
            full["usage"]["input_tokens"].get<int>() +
                full["usage"]["cache_read_input_tokens"].get<int>());
}

TEST_F(ClientApiServerTest, XApiKeyIsAcceptedBesideBearer) {
  OpenAIServerOptions options;
  options.api_keys = *ApiKeys::FromKeys({"sk-test-0123456789abcdef"});
  StartServer(options);
  ClientResponse r = Post("/v1/messages", Message("hi"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "authentication_error");
  r = Post("/v1/messages", Message("hi"), {{"x-api-key", "sk-test-0123456789abcdef"}});
  EXPECT_EQ(r.status, 200) << r.body;
  r = Post("/v1/messages", Message("hi"), {{"x-api-key", "sk-wrong-0123456789abcdef"}});
  EXPECT_EQ(r.status, 401);
  r = Post("/v1/messages", Message("hi"), {{"Authorization", "Bearer sk-test-0123456789abcdef"}});
  EXPECT_EQ(r.status, 200);
  // x-api-key belongs to the Anthropic routes only.
  r = Post("/v1/responses", {{"model", "fake"}, {"input", "hi"}},
           {{"x-api-key", "sk-test-0123456789abcdef"}});
  EXPECT_EQ(r.status, 401);
}

TEST_F(ClientApiServerTest, ResponsesReturnsTheResponseObject) {
  const ClientResponse r = Post("/v1/responses", {{"model", "fake"},
                                                  {"input", "hello"},
                                                  {"instructions", "brief"},
                                                  {"metadata", {{"k", "v"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["store"], false);
  EXPECT_EQ(j["instructions"], "brief");
  EXPECT_EQ(j["metadata"]["k"], "v");
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hello! I am a fake model.");
  EXPECT_EQ(j["usage"]["output_tokens"], 26);
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
}

TEST_F(ClientApiServerTest, ResponsesIncompleteAndFunctionCall) {
  json j = json::parse(
      Post("/v1/responses", {{"model", "fake"}, {"input", "hello"}, {"max_output_tokens", 3}})
          .body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  const json tools = {{{"type", "function"},
                       {"name", "get_weather"},
                       {"parameters", WeatherTool()["input_schema"]}}};
  j = json::parse(
      Post("/v1/responses",
           {{"model", "fake"}, {"input", "hello"}, {"tools", tools}, {"tool_choice", "required"}})
          .body);
  ASSERT_EQ(j["output"].size(), 1u) << j.dump();
  EXPECT_EQ(j["output"][0]["type"], "function_call");
  EXPECT_EQ(j["output"][0]["name"], "get_weather");
  EXPECT_EQ(json::parse(j["output"][0]["arguments"].get<std::string>()), (json{{"city", "Paris"}}));
  // The call's output goes back as an item; the fake answers a tool response in words.
  const json input = {
      {{"role", "user"}, {"content", "hello"}},
      {{"type", "function_call"},
       {"call_id", j["output"][0]["call_id"]},
       {"name", "get_weather"},
       {"arguments", j["output"][0]["arguments"]}},
      {{"type", "function_call_output"}, {"call_id", j["output"][0]["call_id"]}, {"output", "22"}}};
  j = json::parse(
      Post("/v1/responses", {{"model", "fake"}, {"input", input}, {"tools", tools}}).body);
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "It is 22 degrees in Paris.") << j.dump();
}

TEST_F(ClientApiServerTest, ResponsesStreamEvents) {
  const ClientResponse r =
      Post("/v1/responses", {{"model", "fake"}, {"input", "think: 2+2"}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Event> events = Events(r.body);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events[0].name, "response.created");
  EXPECT_EQ(events[1].name, "response.in_progress");
  EXPECT_EQ(events.back().name, "response.completed");
  std::string reasoning, text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["sequence_number"], i);
    EXPECT_EQ(events[i].name, events[i].data["type"]);
    if (events[i].name == "response.reasoning_text.delta") reasoning += events[i].data["delta"];
    if (events[i].name == "response.output_text.delta") text += events[i].data["delta"];
  }
  const json final = events.back().data["response"];
  ASSERT_EQ(final["output"].size(), 2u) << final.dump();
  EXPECT_EQ(final["output"][0]["type"], "reasoning");
  EXPECT_EQ(final["output"][0]["content"][0]["text"], reasoning);
  EXPECT_EQ(final["output"][1]["content"][0]["text"], text);
  EXPECT_NE(text.find("The answer is 4."), std::string::npos);
  EXPECT_GT(final["usage"]["output_tokens"].get<int>(), 10);
}

TEST_F(ClientApiServerTest, ResponsesErrorsNameTheResponsesField) {
  ClientResponse r = Post("/v1/responses",
                          {{"model", "fake"}, {"input", "hi"}, {"previous_response_id", "resp_1"}});
  ASSERT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "previous_response_id");
  r = Post("/v1/responses", {{"model", "fake"}, {"input", "hi"}, {"max_output_tokens", 100000}});
  ASSERT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "max_output_tokens") << r.body;
  EXPECT_TRUE(
      json::parse(r.body)["error"]["message"].get<std::string>().starts_with("max_output_tokens:"))
      << r.body;
}

}  // namespace
}  // namespace spark::engine::server
