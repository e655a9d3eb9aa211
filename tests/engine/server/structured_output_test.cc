// Structured output end to end: the OpenAI server over the real EngineService, whose sampler
// applies xgrammar's masks, with a model runner that wants to write letters (ZeroCostRunner) and
// the one-byte-per-token ByteCodec. Whatever the model prefers, replies follow the requested
// JSON Schema, regex, choice or forced tool call; logit_bias moves the model; the request-phase
// histograms count requests.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "engine/server/engine_service.h"
#include "engine/server/openai_server.h"
#include "tests/engine/server/http_test_client.h"
#include "tests/engine/server/zero_cost_runner.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using testing::HttpCall;
using testing::SseData;

class StructuredOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::EngineOptions eo;
    eo.blocks.num_blocks = 1024;
    eo.scheduler.max_model_len = 4096;
    eo.eos_token_id = ByteCodec::kEos;
    auto engine = runtime::Engine::Create(eo, &runner_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    service_ = std::make_unique<EngineService>(std::move(*engine), eo.scheduler.max_model_len,
                                               ByteCodec::kVocabSize);
    OpenAIServerOptions options;
    options.http.port = 0;
    options.served_model_name = "zero";
    auto server = OpenAIServer::Start(options, service_.get(), &codec_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }

  json Reply(json extra, int seed) {
    json body = {{"model", "zero"},
                 {"messages", {{{"role", "user"}, {"content", "go " + std::to_string(seed)}}}},
                 {"max_tokens", 1500},
                 {"temperature", 1.0},
                 {"seed", seed}};
    body.update(extra);
    const auto r = HttpCall(server_->port(), "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  }

  testing::ZeroCostRunner runner_;
  ByteCodec codec_;
  std::unique_ptr<EngineService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(StructuredOutputTest, RepliesFollowTheJsonSchema) {
  const json schema = json::parse(R"({
      "type": "object",
      "properties": {"name": {"type": "string", "maxLength": 12},
                     "age": {"type": "integer", "minimum": 0, "maximum": 120},
                     "pet": {"enum": ["cat", "dog", null]}},
      "required": ["name", "age", "pet"]})");
  for (int seed = 1; seed <= 4; ++seed) {
    const json j = Reply({{"response_format",
                           {{"type", "json_schema"},
                            {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}}}},
                         seed);
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    const std::string content = j["choices"][0]["message"]["content"];
    const json doc = json::parse(content, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << content;
    EXPECT_EQ(doc.size(), 3u) << content;
    // maxLength counts characters (code points), not bytes.
    const std::string name = doc["name"].is_string() ? doc["name"].get<std::string>() : "";
    const auto chars = std::count_if(name.begin(), name.end(),
                                     [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
    EXPECT_TRUE(doc["name"].is_string() && chars <= 12) << content;
    EXPECT_TRUE(doc["age"].is_number_integer() && doc["age"] >= 0 && doc["age"] <= 120) << content;
    EXPECT_TRUE(doc["pet"] == "cat" || doc["pet"] == "dog" || doc["pet"].is_null()) << content;
  }
}

TEST_F(StructuredOutputTest, JsonObjectRegexAndChoice) {
  for (int seed = 1; seed <= 3; ++seed) {
    json j = Reply({{"response_format", {{"type", "json_object"}}}, {"max_tokens", 3000},
                    {"logit_bias", {{"34", 60}, {"125", 60}}}},  // '"' and '}' beat the letter
                   seed);
    std::string content = j["choices"][0]["message"]["content"];
    EXPECT_TRUE(json::parse(content, nullptr, false).is_object()) << content;
    j = Reply({{"structured_outputs", {{"regex", "[0-9]{3}-[a-z]{2,4}"}}}}, seed);
    content = j["choices"][0]["message"]["content"];
    EXPECT_TRUE(std::regex_match(content, std::regex("[0-9]{3}-[a-z]{2,4}"))) << content;
    j = Reply({{"structured_outputs", {{"choice", {"red", "green", "blue"}}}}}, seed);
    content = j["choices"][0]["message"]["content"];
    EXPECT_TRUE(content == "red" || content == "green" || content == "blue") << content;
  }
}

TEST_F(StructuredOutputTest, StreamingFollowsTheGrammarToo) {
  const json body = {{"model", "zero"},
                     {"messages", {{{"role", "user"}, {"content", "x"}}}},
                     {"stream", true},
                     {"structured_outputs", {{"choice", {"alpha", "beta"}}}}};
  const auto r = HttpCall(server_->port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text;
  for (const std::string& d : SseData(r.body)) {
    if (d == "[DONE]") break;
    text += json::parse(d)["choices"][0]["delta"].value("content", "");
  }
  EXPECT_TRUE(text == "alpha" || text == "beta") << text;
}

TEST_F(StructuredOutputTest, ForcedToolCallsAreValidCallsOfTheRightTool) {
  const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer",
        "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}}},
      {"type": "function", "function": {"name": "now"}}])");
  for (int seed = 1; seed <= 4; ++seed) {
    json j = Reply({{"tools", tools}, {"tool_choice", "required"}}, seed);
    ASSERT_FALSE(j.is_null());
    const json& m = j["choices"][0]["message"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << j.dump();
    ASSERT_EQ(m["tool_calls"].size(), 1u) << j.dump();
    const json call = m["tool_calls"][0]["function"];
    const json args = json::parse(call["arguments"].get<std::string>(), nullptr, false);
    if (call["name"] == "get_weather") {
      EXPECT_TRUE(args["city"] == "Paris" || args["city"] == "Oslo") << call;
      EXPECT_TRUE(args["days"] >= 1 && args["days"] <= 7) << call;
    } else {
      EXPECT_EQ(call["name"], "now") << call;
      EXPECT_EQ(args, json::object()) << call;
    }
    j = Reply({{"tools", tools},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
              seed);
    const json named = j["choices"][0]["message"]["tool_calls"][0]["function"];
    EXPECT_EQ(named["name"], "get_weather") << j.dump();
    const json named_args = json::parse(named["arguments"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(named_args["city"] == "Paris" || named_args["city"] == "Oslo") << named;
  }
}

TEST_F(StructuredOutputTest, LogitBiasMovesTheModel) {
  json j = Reply({{"max_tokens", 6}, {"temperature", 0}, {"logit_bias", {{"90", 100}}}}, 1);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "ZZZZZZ");
  // The model's own first letter, banned, never appears.
  j = Reply({{"max_tokens", 1}, {"temperature", 0}}, 2);
  const std::string first = j["choices"][0]["message"]["content"];
  ASSERT_EQ(first.size(), 1u);
  j = Reply({{"max_tokens", 1}, {"temperature", 0},
             {"logit_bias", {{std::to_string(static_cast<unsigned char>(first[0])), -100}}}},
            2);
  EXPECT_NE(j["choices"][0]["message"]["content"], first);
}

TEST_F(StructuredOutputTest, RequestPhasesAreMeasured) {
  Reply({{"max_tokens", 4}}, 1);
  Reply({{"max_tokens", 4}}, 2);
  const std::string text = HttpCall(server_->port(), "GET", "/metrics").body;
  for (const char* name : {"vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count",
                           "vllm:request_decode_time_seconds_count",
                           "vllm:request_inference_time_seconds_count"}) {
    const size_t at = text.find(std::string(name) + "{");
    ASSERT_NE(at, std::string::npos) << name;
    const size_t value = text.find("} ", at) + 2;
    EXPECT_EQ(std::stod(text.substr(value, text.find('\n', value) - value)), 2.0) << name;
  }
}

}  // namespace
}  // namespace spark::engine::server
