#include "engine/server/openai_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace spark::engine::server {
namespace {

TEST(OpenAIRequestTest, ParsesChatSamplingFields) {
  CompletionRequest r;
  auto e = ParseCompletionRequest(Endpoint::kChat, R"({
      "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true,
      "stream_options": {"include_usage": true}, "n": 2, "max_completion_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1, "seed": 42,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "stop": ["x", "y"],
      "logprobs": true, "top_logprobs": 3, "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low"})",
                                  &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(*r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_EQ(r.tool_choice, "required");
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.chat.template_kwargs["reasoning_effort"], "low");
}

// Numbers in errors read as the client wrote them: "-1", not "-1.000000".
TEST(OpenAIRequestTest, OutOfRangeNumbersAreWrittenNaturally) {
  CompletionRequest r;
  auto e = ParseCompletionRequest(
      Endpoint::kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": -1})", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("temperature: -1 is outside [0, "), std::string::npos) << e->message;
  EXPECT_EQ(e->message.find(".000000"), std::string::npos) << e->message;
}

TEST(OpenAIRequestTest, ToolChoiceForms) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather"}},
                   {"type": "function", "function": {"name": "now"}}])";
  auto parse = [&](const std::string& choice, bool with_tools, CompletionRequest* r) {
    return ParseCompletionRequest(
        Endpoint::kChat,
        R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": )" +
            choice + (with_tools ? ", " + tools : "") + "}",
        r);
  };
  CompletionRequest named;
  auto e = parse(R"({"type": "function", "function": {"name": "now"}})", true, &named);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(named.tool_choice, "function");
  EXPECT_EQ(named.tool_choice_function, "now");
  EXPECT_TRUE(named.tool_choice_set);
  CompletionRequest r;
  for (const char* choice : {"\"auto\"", "\"none\"", "\"required\""}) {
    e = parse(choice, false, &r);
    ASSERT_TRUE(e.has_value()) << choice;
    EXPECT_EQ(e->param, "tool_choice");
    EXPECT_NE(e->message.find("without `tools`"), std::string::npos) << e->message;
  }
  e = parse(R"({"type": "function", "function": {"name": "later"}})", true, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tool_choice");
  EXPECT_NE(e->message.find("'later' is not among `tools` (get_weather, now)"), std::string::npos)
      << e->message;
  e = parse("\"sometimes\"", true, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tool_choice");
}

TEST(OpenAIRequestTest, CompletionPromptForms) {
  CompletionRequest text, ids, nested;
  EXPECT_FALSE(
      ParseCompletionRequest(Endpoint::kCompletion, R"({"model": "m", "prompt": ["hi"]})", &text));
  EXPECT_EQ(text.prompt_text, "hi");
  EXPECT_FALSE(
      ParseCompletionRequest(Endpoint::kCompletion, R"({"model": "m", "prompt": [1, 2]})", &ids));
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(ParseCompletionRequest(
      Endpoint::kCompletion, R"({"model": "m", "prompt": [[3]], "logprobs": 2})", &nested));
  EXPECT_EQ(nested.prompt_ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(nested.params.top_logprobs, 2);
}

TEST(OpenAIRequestTest, BatchedPromptsKeepEachPrompt) {
  CompletionRequest texts, ids;
  EXPECT_FALSE(ParseCompletionRequest(Endpoint::kCompletion,
                                      R"({"model": "m", "prompt": ["a", "b c"]})", &texts));
  EXPECT_EQ(texts.prompt_texts, (std::vector<std::string>{"a", "b c"}));
  EXPECT_EQ(texts.prompt_text, "a");
  EXPECT_FALSE(ParseCompletionRequest(Endpoint::kCompletion,
                                      R"({"model": "m", "prompt": [[1, 2], [3]]})", &ids));
  ASSERT_EQ(ids.prompt_id_lists.size(), 2u);
  EXPECT_EQ(ids.prompt_id_lists[1], (std::vector<int32_t>{3}));
  for (const char* bad : {R"([[1], "a"])", R"([[1], []])", R"(["a", 3])", R"([])"}) {
    CompletionRequest r;
    auto e = ParseCompletionRequest(
        Endpoint::kCompletion, std::string(R"({"model": "m", "prompt": )") + bad + "}", &r);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->param, "prompt") << bad;
  }
}

// echo + logprobs scores the prompt with the same number of alternatives (vLLM); max_tokens 0
// only where something is scored; prompt_logprobs not with stream.
TEST(OpenAIRequestTest, PromptScoringFields) {
  CompletionRequest r;
  EXPECT_FALSE(ParseCompletionRequest(
      Endpoint::kCompletion,
      R"({"model": "m", "prompt": "x", "echo": true, "logprobs": 3, "max_tokens": 0})", &r));
  EXPECT_EQ(r.params.prompt_logprobs, 3);
  EXPECT_EQ(r.max_tokens, 0);
  CompletionRequest plain;
  EXPECT_FALSE(ParseCompletionRequest(Endpoint::kCompletion,
                                      R"({"model": "m", "prompt": "x", "logprobs": 3})", &plain));
  EXPECT_EQ(plain.params.prompt_logprobs, -1) << "no prompt rows without echo: no cost";
  CompletionRequest chat;
  EXPECT_FALSE(ParseCompletionRequest(
      Endpoint::kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0,
          "return_tokens_as_token_ids": true})",
      &chat));
  EXPECT_EQ(chat.params.prompt_logprobs, 0);
  EXPECT_TRUE(chat.return_tokens_as_token_ids);
  CompletionRequest r2;
  auto e = ParseCompletionRequest(Endpoint::kCompletion,
                                  R"({"model": "m", "prompt": "x", "max_tokens": 0})", &r2);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "max_tokens");
  CompletionRequest r3;
  e = ParseCompletionRequest(
      Endpoint::kCompletion,
      R"({"model": "m", "prompt": "x", "stream": true, "prompt_logprobs": 1})", &r3);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "prompt_logprobs");
}

TEST(OpenAIRequestTest, RejectsDeepNestingAndWrongTypes) {
  CompletionRequest r;
  const std::string deep = R"({"model": "m", "prompt": )" + std::string(100000, '[') + "]}";
  auto e = ParseCompletionRequest(Endpoint::kCompletion, deep, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  e = ParseCompletionRequest(
      Endpoint::kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "top_logprobs");
  e = ParseCompletionRequest(
      Endpoint::kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true,
          "stream_options": {"include_usage": 1}})",
      &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "stream_options.include_usage");
  nlohmann::json j = nlohmann::json::parse(e->ToJson());
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(OpenAIRequestTest, StructuredOutputFormsAndLogitControls) {
  CompletionRequest r;
  auto e = ParseCompletionRequest(Endpoint::kChat, R"({"model": "m",
      "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
                          "schema": {"type": "object"}}},
      "logit_bias": {"5": 1.5, "7": -100}, "min_tokens": 3})",
                                  &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  ASSERT_TRUE(r.structured.has_value());
  EXPECT_EQ(r.structured->kind, grammar::ConstraintRequest::Kind::kJsonSchema);
  EXPECT_EQ(r.structured->param, "response_format.json_schema.schema");
  EXPECT_EQ(r.structured->schema, nlohmann::ordered_json::parse(R"({"type": "object"})"));
  EXPECT_EQ(r.params.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{5, 1.5f}, {7, -100.0f}}));
  EXPECT_EQ(r.params.min_tokens, 3);
  r = CompletionRequest();
  e = ParseCompletionRequest(Endpoint::kCompletion, R"({"model": "m", "prompt": "x",
      "structured_outputs": {"choice": ["a", "b"], "disable_any_whitespace": true}})",
                             &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(r.structured->kind, grammar::ConstraintRequest::Kind::kChoice);
  EXPECT_EQ(r.structured->choices, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(r.structured->any_whitespace);
  e = ParseCompletionRequest(Endpoint::kCompletion, R"({"model": "m", "prompt": "x",
      "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strictly": 1}}})",
                             &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format.json_schema.strictly");
}

}  // namespace
}  // namespace spark::engine::server
