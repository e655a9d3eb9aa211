// Nothing is silently ignored: every request field the server does not implement is a 400 naming
// it; the few accepted without effect are the documented ones; structured-output, logit_bias and
// max_tokens rules; /v1/models/{id}, /tokenize, /detokenize, /version; the request-phase metrics.
// OpenAIServer over a FakeService and the ByteCodec, through a real HTTP client.
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

class ServerFieldsTest : public ::testing::Test {
 protected:
  void StartServer(OpenAIServerOptions options = {}, testing::FakeOptions fake = {}) {
    server_.reset();
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
  ClientResponse Post(const std::string& target, const json& body) {
    return HttpCall(server_->port(), "POST", target, body.dump());
  }
  static json Chat(json extra = json::object()) {
    json body = {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    body.update(extra);
    return body;
  }
  // A 400 whose error names `param` and whose message holds `piece`.
  void Expect400(const std::string& target, const json& body, const std::string& param,
                 const std::string& piece) {
    const ClientResponse r = Post(target, body);
    ASSERT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    const json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["param"], param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(piece), std::string::npos) << r.body;
  }

  ByteCodec codec_;
  std::unique_ptr<FakeService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(ServerFieldsTest, UnimplementedFieldsAreRefusedByName) {
  Expect400("/v1/chat/completions", Chat({{"frobnicate", 1}}), "frobnicate",
            "not a parameter this server implements");
  Expect400("/v1/completions", {{"model", "fake"}, {"prompt", "a"}, {"suffix", "b"}}, "suffix",
            "not a parameter this server implements");
  Expect400("/v1/chat/completions", Chat({{"guided_json", json::object()}}), "guided_json",
            "structured_outputs.json");
  Expect400("/v1/chat/completions", Chat({{"functions", json::array()}}), "functions", "tools");
  Expect400("/v1/chat/completions", Chat({{"prompt", "x"}}), "prompt",
            "not a parameter of /v1/chat/completions");
  Expect400("/v1/chat/completions", Chat({{"best_of", 2}}), "best_of", "not supported");
  Expect400("/v1/chat/completions", Chat({{"skip_special_tokens", 1}}), "skip_special_tokens",
            "expected true or false");
  Expect400("/v1/chat/completions", Chat({{"parallel_tool_calls", false}}),
            "parallel_tool_calls", "every call");
  Expect400("/v1/chat/completions", Chat({{"store", true}}), "store", "stores no completions");
  Expect400("/v1/chat/completions", Chat({{"stream_options", {{"include_usage", true}}}}),
            "stream_options", "only allowed with \"stream\": true");
  Expect400("/v1/chat/completions",
            Chat({{"stream", true}, {"stream_options", {{"continuous_usage_stats", true}}}}),
            "stream_options.continuous_usage_stats", "not supported");
  Expect400("/v1/chat/completions",
            Chat({{"chat_template_kwargs", {{"enable_thinking", "yes"}}}}),
            "chat_template_kwargs.enable_thinking", "true or false");
}

TEST_F(ServerFieldsTest, DocumentedFieldsAreAcceptedWithoutEffect) {
  const ClientResponse r = Post(
      "/v1/chat/completions",
      Chat({{"user", "u1"}, {"metadata", {{"k", "v"}}}, {"prompt_cache_key", "p"},
            {"safety_identifier", "s"}, {"store", false}, {"service_tier", "auto"},
            {"parallel_tool_calls", true}, {"skip_special_tokens", false},
            {"include_stop_str_in_output", false}, {"modalities", {"text"}}, {"best_of", 1},
            {"add_generation_prompt", true}, {"continue_final_message", false},
            {"max_tokens", nullptr}}));
  ASSERT_EQ(r.status, 200) << r.body;
}

TEST_F(ServerFieldsTest, IncludeStopStringKeepsIt) {
  json body = {{"model", "fake"}, {"prompt", "say hi"}, {"stop", "fake"}, {"max_tokens", 50}};
  json j = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello! I am a ");
  body["include_stop_str_in_output"] = true;
  j = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello! I am a fake");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerFieldsTest, ReasoningEffortNamesAndDeepSeekScale) {
  for (const json& effort : {json("low"), json("high"), json("max"), json(1), json(100)}) {
    const ClientResponse r = Post("/v1/chat/completions", Chat({{"reasoning_effort", effort}}));
    EXPECT_EQ(r.status, 200) << effort << " " << r.body;
  }
  Expect400("/v1/chat/completions", Chat({{"reasoning_effort", 0}}), "reasoning_effort",
            "DeepSeek-V4.1's scale");
  Expect400("/v1/chat/completions", Chat({{"reasoning_effort", "extreme"}}), "reasoning_effort",
            "is not an effort");
}

TEST_F(ServerFieldsTest, LogitBiasAndMinTokensReachTheEngine) {
  ClientResponse r = Post("/v1/chat/completions",
                          Chat({{"logit_bias", {{"72", 100}, {"10", -100}}}, {"min_tokens", 2}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const runtime::SamplingParams p = service_->last_params();
  auto bias = p.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{10, -100.0f}, {72, 100.0f}}));
  EXPECT_EQ(p.min_tokens, 2);
  Expect400("/v1/chat/completions", Chat({{"logit_bias", {{"300", 1}}}}), "logit_bias",
            "outside the vocabulary of 257");
  Expect400("/v1/chat/completions", Chat({{"logit_bias", {{"7", 101}}}}), "logit_bias",
            "[-100, 100]");
  Expect400("/v1/chat/completions", Chat({{"logit_bias", {{"x", 1}}}}), "logit_bias",
            "not a token id");
  Expect400("/v1/chat/completions", Chat({{"min_tokens", 9}, {"max_tokens", 4}}), "min_tokens",
            "above max_tokens");
}

TEST_F(ServerFieldsTest, StructuredOutputRequestsCompileOrNameTheFault) {
  for (const json& extra : {
           json{{"response_format", {{"type", "json_object"}}}},
           json{{"response_format",
                 {{"type", "json_schema"},
                  {"json_schema",
                   {{"name", "p"}, {"strict", true}, {"schema", {{"type", "object"}}}}}}}},
           json{{"structured_outputs", {{"regex", "[a-z]+"}}}},
           json{{"structured_outputs", {{"choice", {"yes", "no"}}}}},
           json{{"structured_outputs", {{"grammar", "root ::= \"a\" | \"b\""}}}},
           json{{"structured_outputs", {{"json", R"({"type": "integer"})"}}}},
       }) {
    const ClientResponse r = Post("/v1/chat/completions", Chat(extra));
    ASSERT_EQ(r.status, 200) << extra << " -> " << r.body;
    EXPECT_NE(service_->last_params().constraint, nullptr) << extra;
  }
  Post("/v1/chat/completions", Chat({{"response_format", {{"type", "text"}}}}));
  EXPECT_EQ(service_->last_params().constraint, nullptr);
  Expect400("/v1/chat/completions",
            Chat({{"response_format",
                   {{"type", "json_schema"},
                    {"json_schema",
                     {{"name", "p"},
                      {"schema",
                       {{"type", "object"},
                        {"properties", {{"tags", {{"type", "array"}, {"uniqueItems", true}}}}}}}}}}}}),
            "response_format.json_schema.schema",
            "response_format.json_schema.schema: at /properties/tags: "
                               "keyword \"uniqueItems\"");
  Expect400("/v1/chat/completions", Chat({{"structured_outputs", {{"regex", "(a"}}}}),
            "structured_outputs.regex", "not a regular expression");
  Expect400("/v1/chat/completions",
            Chat({{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}),
            "structured_outputs", "exactly one of");
  Expect400("/v1/chat/completions",
            Chat({{"structured_outputs", {{"structural_tag", "{}"}}}}),
            "structured_outputs.structural_tag", "not supported");
  Expect400("/v1/chat/completions", Chat({{"response_format", {{"type", "xml"}}}}),
            "response_format.type", "not supported");
  Expect400("/v1/chat/completions",
            Chat({{"response_format", {{"type", "json_object"}}},
                  {"structured_outputs", {{"regex", "a"}}}}),
            "structured_outputs", "not both");
}

TEST_F(ServerFieldsTest, ForcedToolCallsAreConstrainedToTheParameters) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  ClientResponse r = Post("/v1/chat/completions",
                          Chat({{"tools", tools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(service_->last_params().constraint, nullptr);
  const json call = json::parse(r.body)["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  json bad = tools;
  bad[0]["function"]["parameters"]["properties"]["city"]["not"] = json::object();
  Expect400("/v1/chat/completions", Chat({{"tools", bad}, {"tool_choice", "required"}}),
            "tools[0].function.parameters", "at /properties/city: keyword \"not\"");
  Expect400("/v1/chat/completions",
            Chat({{"tools", tools}, {"tool_choice", "required"},
                  {"response_format", {{"type", "json_object"}}}}),
            "response_format", "cannot be combined with tool_choice");
}

TEST_F(ServerFieldsTest, MaxTokensDefaultAndLimitFromTheServer) {
  OpenAIServerOptions o;
  o.default_max_tokens = 5;
  o.max_tokens_limit = 8;
  StartServer(o);
  json j = json::parse(Post("/v1/chat/completions", Chat()).body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  Expect400("/v1/chat/completions", Chat({{"max_tokens", 9}}), "max_tokens",
            "9 is above this server's limit of 8");
  Expect400("/v1/completions", {{"model", "fake"}, {"prompt", "a"}, {"max_tokens", 100}},
            "max_tokens", "100 is above this server's limit of 8");
}

TEST_F(ServerFieldsTest, ContextOverflowNamesBothNumbers) {
  testing::FakeOptions fake;
  fake.max_model_len = 64;
  StartServer({}, fake);
  Expect400("/v1/completions", {{"model", "fake"}, {"prompt", std::string(80, 'a')}}, "prompt",
            "maximum context length is 64 tokens. However, your request has 80 input tokens");
  Expect400("/v1/completions", {{"model", "fake"}, {"prompt", "abc"}, {"max_tokens", 62}},
            "max_tokens", "maximum context length is 64 tokens. However, you requested 65 tokens");
}

TEST_F(ServerFieldsTest, ModelById) {
  ClientResponse r = HttpCall(server_->port(), "GET", "/v1/models/fake");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["id"], "fake");
  EXPECT_EQ(json::parse(r.body)["object"], "model");
  r = HttpCall(server_->port(), "GET", "/v1/models/other");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found");
}

TEST_F(ServerFieldsTest, TokenizeDetokenizeVersion) {
  ClientResponse r = Post("/tokenize", {{"model", "fake"}, {"prompt", "hi!"},
                                        {"return_token_strs", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["tokens"], json({'h', 'i', '!'}));
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["max_model_len"], 4096);
  EXPECT_EQ(j["token_strs"], json({"h", "i", "!"}));
  r = Post("/tokenize", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string chat = *codec_.RenderChat(*tokenizer::ParseChatRequest(
      nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "x"}]})")));
  EXPECT_EQ(json::parse(r.body)["count"], chat.size());
  EXPECT_EQ(Post("/tokenize", {{"prompt", "a"}, {"truncate", 1}}).status, 400);
  r = Post("/detokenize", {{"tokens", {'o', 'k'}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["prompt"], "ok");
  r = Post("/detokenize", {{"tokens", {999}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tokens");
  r = HttpCall(server_->port(), "GET", "/version");
  ASSERT_EQ(r.status, 200);
  j = json::parse(r.body);
  EXPECT_TRUE(j["version"].is_string() && !j["version"].get<std::string>().empty());
  EXPECT_TRUE(j["build"].is_string() && !j["build"].get<std::string>().empty());
}

TEST_F(ServerFieldsTest, MetricsNameThePhaseHistogramsAndPreemptions) {
  const std::string text = HttpCall(server_->port(), "GET", "/metrics").body;
  for (const char* name :
       {"# TYPE vllm:request_queue_time_seconds histogram",
        "# TYPE vllm:request_prefill_time_seconds histogram",
        "# TYPE vllm:request_decode_time_seconds histogram",
        "# TYPE vllm:request_inference_time_seconds histogram",
        "# TYPE vllm:num_preemptions_total counter", "# TYPE vllm:num_requests_waiting gauge",
        "# TYPE vllm:kv_cache_usage_perc gauge", "# TYPE vllm:prefix_cache_queries_total counter",
        "# TYPE vllm:prefix_cache_hits_total counter"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace spark::engine::server
