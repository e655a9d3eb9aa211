// Anthropic Messages and OpenAI Responses bodies translated into chat-completions bodies, and
// every field they cannot carry refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/server/anthropic_messages.h"
#include "engine/server/responses_api.h"

namespace spark::engine::server {
namespace {

using nlohmann::ordered_json;

ordered_json Messages(ordered_json extra = ordered_json::object()) {
  ordered_json body = {
      {"model", "m"}, {"max_tokens", 64}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(extra);
  return body;
}

// The 400 for `body` names `param` and its message holds `piece`.
void ExpectMessagesRefused(const ordered_json& body, const std::string& param,
                           const std::string& piece, bool count_tokens = false) {
  MessagesRequest out;
  auto e = TranslateMessagesRequest(body.dump(), count_tokens, &out);
  ASSERT_TRUE(e.has_value()) << body.dump();
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->param, param) << e->message;
  EXPECT_NE(e->message.find(piece), std::string::npos) << e->message;
}

TEST(AnthropicMessagesTest, TranslatesAConversationWithToolsAndThinking) {
  MessagesRequest out;
  const ordered_json body = Messages(
      {{"system",
        {{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}}},
       {"messages",
        {{{"role", "user"}, {"content", "weather in Paris?"}},
         {{"role", "assistant"},
          {"content",
           {{{"type", "thinking"}, {"thinking", "call it"}, {"signature", "x"}},
            {{"type", "tool_use"},
             {"id", "toolu_1"},
             {"name", "get_weather"},
             {"input", {{"city", "Paris"}}}}}}},
         {{"role", "user"},
          {"content",
           {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "22 C"}},
            {{"type", "text"}, {"text", "and tomorrow?"}}}}}}},
       {"tools",
        {{{"name", "get_weather"},
          {"description", "d"},
          {"input_schema",
           {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
       {"tool_choice", {{"type", "auto"}}},
       {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
       {"max_tokens", 2048},
       {"stop_sequences", {"END"}},
       {"temperature", 0.5},
       {"top_k", 5},
       {"metadata", {{"user_id", "u"}}},
       {"stream", true}});
  auto e = TranslateMessagesRequest(body.dump(), false, &out);
  ASSERT_FALSE(e.has_value()) << e->message;
  const ordered_json& c = out.chat_body;
  ASSERT_EQ(c["messages"].size(), 5u) << c.dump();
  EXPECT_EQ(c["messages"][0], (ordered_json{{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(c["messages"][2]["reasoning_content"], "call it");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(c["messages"][3],
            (ordered_json{{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "22 C"}}));
  EXPECT_EQ(c["messages"][4]["role"], "user");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(c["tool_choice"], "auto");
  EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(c["stop"], ordered_json({"END"}));
  EXPECT_EQ(c["top_k"], 5);
  EXPECT_EQ(c["max_tokens"], 2048);
  EXPECT_EQ(c["stream"], true);
  EXPECT_TRUE(out.thinking);
}

TEST(AnthropicMessagesTest, ToolChoiceAnyIsRequiredAndThinkingDefaultsOff) {
  MessagesRequest out;
  const ordered_json tools = {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}};
  ASSERT_FALSE(TranslateMessagesRequest(
      Messages({{"tools", tools}, {"tool_choice", {{"type", "any"}}}}).dump(), false, &out));
  EXPECT_EQ(out.chat_body["tool_choice"], "required");
  EXPECT_EQ(out.chat_body["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_FALSE(out.thinking);
  ASSERT_FALSE(TranslateMessagesRequest(
      Messages({{"tools", tools}, {"tool_choice", {{"type", "tool"}, {"name", "f"}}}}).dump(),
      false, &out));
  EXPECT_EQ(out.chat_body["tool_choice"],
            (ordered_json{{"type", "function"}, {"function", {{"name", "f"}}}}));
}

TEST(AnthropicMessagesTest, ToolResultErrorsReachTheModelMarked) {
  MessagesRequest out;
  const ordered_json body =
      Messages({{"messages",
                 {{{"role", "user"},
                   {"content",
                    {{{"type", "tool_result"},
                      {"tool_use_id", "t"},
                      {"is_error", true},
                      {"content", {{{"type", "text"}, {"text", "no such file"}}}}}}}}}}});
  ASSERT_FALSE(TranslateMessagesRequest(body.dump(), false, &out));
  EXPECT_EQ(out.chat_body["messages"][0]["content"], "Error: no such file");
}

TEST(AnthropicMessagesTest, RefusesWhatItCannotCarryByName) {
  ExpectMessagesRefused(Messages({{"top_logprobs", 2}}), "top_logprobs", "refused");
  ExpectMessagesRefused(Messages({{"mcp_servers", ordered_json::array()}}), "mcp_servers",
                        "not supported");
  ordered_json image =
      Messages({{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "image"}, {"source", {{"type", "base64"}}}}}}}}}});
  ExpectMessagesRefused(image, "messages[0].content[0]", "image");
  ordered_json doc =
      Messages({{"messages", {{{"role", "user"}, {"content", {{{"type", "document"}}}}}}}});
  ExpectMessagesRefused(doc, "messages[0].content[0]", "document");
  ExpectMessagesRefused(
      Messages(
          {{"system",
            {{{"type", "text"}, {"text", "s"}, {"cache_control", {{"type", "persistent"}}}}}}}),
      "system[0].cache_control", "ephemeral");
  ExpectMessagesRefused(Messages({{"tools", {{{"type", "web_search_20250305"}, {"name", "w"}}}}}),
                        "tools[0].type", "server tool");
  ExpectMessagesRefused(Messages({{"tool_choice", {{"type", "auto"}}}}), "tool_choice",
                        "without `tools`");
  ExpectMessagesRefused(Messages({{"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}}}),
                        "thinking.budget_tokens", "1024");
  ExpectMessagesRefused(Messages({{"thinking", {{"type", "enabled"}, {"budget_tokens", 4096}}}}),
                        "thinking.budget_tokens", "below max_tokens");
  ExpectMessagesRefused(Messages({{"temperature", 1.5}}), "temperature", "[0, 1]");
  ExpectMessagesRefused(Messages({{"metadata", {{"tags", "x"}}}}), "metadata.tags", "user_id");
  ordered_json no_max = Messages();
  no_max.erase("max_tokens");
  ExpectMessagesRefused(no_max, "max_tokens", "required");
  ExpectMessagesRefused(Messages({{"messages", {{{"role", "system"}, {"content", "s"}}}}}),
                        "messages[0].role", "top-level `system`");
  ExpectMessagesRefused(
      Messages({{"messages",
                 {{{"role", "assistant"},
                   {"content", {{{"type", "redacted_thinking"}, {"data", "x"}}}}}}}}),
      "messages[0].content[0]", "redacted_thinking");
  ExpectMessagesRefused(
      Messages({{"tools", {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}}},
                {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}}}),
      "tool_choice.disable_parallel_tool_use", "every call");
  ExpectMessagesRefused(Messages({{"messages",
                                   {{{"role", "user"}, {"content", "hi"}},
                                    {{"role", "assistant"}, {"content", "Sure, "}}}}}),
                        "messages[1]", "prefill");
  ExpectMessagesRefused(
      Messages({{"tools", {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}}},
                {"tool_choice", {{"type", "any"}}},
                {"max_tokens", 2000},
                {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}),
      "thinking", "forces a tool call");
  ordered_json count = Messages({{"stream", true}});
  count.erase("max_tokens");
  ExpectMessagesRefused(count, "stream", "count_tokens", true);
}

TEST(AnthropicMessagesTest, ContextManagementClearsOlderThinking) {
  auto turn = [](const std::string& thought) {
    return ordered_json{{"role", "assistant"},
                        {"content",
                         {{{"type", "thinking"}, {"thinking", thought}, {"signature", ""}},
                          {{"type", "text"}, {"text", "ok"}}}}};
  };
  const ordered_json user = {{"role", "user"}, {"content", "go"}};
  const ordered_json messages = {user, turn("first"), user, turn("second"), user};
  auto reasoning = [&](const ordered_json& keep) {
    MessagesRequest out;
    ordered_json edit = {{"type", "clear_thinking_20251015"}};
    if (!keep.is_null()) edit["keep"] = keep;
    auto e = TranslateMessagesRequest(
        Messages({{"messages", messages}, {"context_management", {{"edits", {edit}}}}}).dump(),
        false, &out);
    EXPECT_FALSE(e.has_value()) << e->message;
    std::vector<std::string> kept;
    for (const auto& m : out.chat_body["messages"]) {
      if (m.contains("reasoning_content")) kept.push_back(m["reasoning_content"]);
    }
    return kept;
  };
  EXPECT_EQ(reasoning(nullptr), (std::vector<std::string>{"second"}));
  EXPECT_EQ(reasoning("all"), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(reasoning({{"type", "thinking_turns"}, {"value", 0}}), std::vector<std::string>{});
  ExpectMessagesRefused(
      Messages({{"context_management", {{"edits", {{{"type", "clear_tool_uses_20250919"}}}}}}}),
      "context_management.edits[0].type", "never cleared");
}

TEST(AnthropicMessagesTest, CountTokensNeedsNoMaxTokens) {
  MessagesRequest out;
  ordered_json body = Messages();
  body.erase("max_tokens");
  ASSERT_FALSE(TranslateMessagesRequest(body.dump(), true, &out));
  EXPECT_FALSE(out.chat_body.contains("max_tokens"));
}

TEST(AnthropicMessagesTest, ErrorsHaveAnthropicsShape) {
  ApiError e = InvalidRequest("top_k", "top_k: bad");
  EXPECT_EQ(
      ordered_json::parse(AnthropicErrorJson(e)),
      (ordered_json{{"type", "error"},
                    {"error", {{"type", "invalid_request_error"}, {"message", "top_k: bad"}}}}));
  e.http_status = 401;
  EXPECT_EQ(ordered_json::parse(AnthropicErrorJson(e))["error"]["type"], "authentication_error");
  e.http_status = 429;
  EXPECT_EQ(ordered_json::parse(AnthropicErrorJson(e))["error"]["type"], "rate_limit_error");
  EXPECT_EQ(AnthropicParam("stop"), "stop_sequences");
}

ordered_json Responses(ordered_json extra = ordered_json::object()) {
  ordered_json body = {{"model", "m"}, {"input", "hi"}};
  body.update(extra);
  return body;
}

void ExpectResponsesRefused(const ordered_json& body, const std::string& param,
                            const std::string& piece) {
  ResponsesRequest out;
  auto e = TranslateResponsesRequest(body.dump(), &out);
  ASSERT_TRUE(e.has_value()) << body.dump();
  EXPECT_EQ(e->param, param) << e->message;
  EXPECT_NE(e->message.find(piece), std::string::npos) << e->message;
}

TEST(ResponsesApiTest, TranslatesItemsToolsAndTextFormat) {
  ResponsesRequest out;
  const ordered_json body =
      Responses({{"instructions", "Be brief."},
                 {"input",
                  {{{"role", "user"}, {"content", "weather?"}},
                   {{"type", "reasoning"},
                    {"id", "rs_1"},
                    {"summary", ordered_json::array()},
                    {"content", {{{"type", "reasoning_text"}, {"text", "call it"}}}}},
                   {{"type", "function_call"},
                    {"call_id", "c1"},
                    {"name", "get_weather"},
                    {"arguments", R"({"city":"Paris"})"}},
                   {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "22 C"}},
                   {{"type", "message"},
                    {"role", "developer"},
                    {"content", {{{"type", "input_text"}, {"text", "answer in JSON"}}}}}}},
                 {"tools",
                  {{{"type", "function"},
                    {"name", "get_weather"},
                    {"strict", true},
                    {"parameters", {{"type", "object"}}}}}},
                 {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                 {"text",
                  {{"format",
                    {{"type", "json_schema"},
                     {"name", "w"},
                     {"strict", true},
                     {"schema", {{"type", "object"}}}}}}},
                 {"reasoning", {{"effort", "low"}}},
                 {"max_output_tokens", 50},
                 {"store", false},
                 {"metadata", {{"k", "v"}}}});
  auto e = TranslateResponsesRequest(body.dump(), &out);
  ASSERT_FALSE(e.has_value()) << e->message;
  const ordered_json& c = out.chat_body;
  ASSERT_EQ(c["messages"].size(), 5u) << c.dump();
  EXPECT_EQ(c["messages"][0]["role"], "system");
  EXPECT_EQ(c["messages"][2]["role"], "assistant");
  EXPECT_EQ(c["messages"][2]["reasoning_content"], "call it");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(c["messages"][3]["role"], "tool");
  EXPECT_EQ(c["messages"][4], (ordered_json{{"role", "system"}, {"content", "answer in JSON"}}));
  EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "get_weather");
  EXPECT_EQ(c["response_format"]["json_schema"]["name"], "w");
  EXPECT_EQ(c["reasoning_effort"], "low");
  EXPECT_EQ(c["max_tokens"], 50);
  EXPECT_EQ(out.echo["metadata"]["k"], "v");
  EXPECT_EQ(out.echo["instructions"], "Be brief.");
}

TEST(ResponsesApiTest, RefusesWhatItCannotCarryByName) {
  ExpectResponsesRefused(Responses({{"previous_response_id", "resp_1"}}), "previous_response_id",
                         "stateless");
  ExpectResponsesRefused(Responses({{"conversation", "c"}}), "conversation", "stateless");
  ExpectResponsesRefused(Responses({{"frobnicate", 1}}), "frobnicate", "refused");
  ExpectResponsesRefused(Responses({{"background", true}}), "background", "foreground");
  ExpectResponsesRefused(Responses({{"include", {"reasoning.encrypted_content"}}}), "include",
                         "not supported");
  ExpectResponsesRefused(Responses({{"tools", {{{"type", "web_search"}}}}}), "tools[0].type",
                         "hosted");
  ExpectResponsesRefused(
      Responses(
          {{"input",
            {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}),
      "input[0].content[0].type", "input_image");
  ExpectResponsesRefused(Responses({{"input", {{{"type", "item_reference"}, {"id", "x"}}}}}),
                         "input[0].type", "item_reference");
  ExpectResponsesRefused(Responses({{"reasoning", {{"summary", "auto"}}}}), "reasoning.summary",
                         "summaries");
  ExpectResponsesRefused(Responses({{"text", {{"format", {{"type", "grammar"}}}}}}),
                         "text.format.type", "not supported");
  ExpectResponsesRefused(Responses({{"parallel_tool_calls", false}}), "parallel_tool_calls",
                         "every call");
  ExpectResponsesRefused(Responses({{"truncation", "auto"}}), "truncation", "never truncated");
  ordered_json no_input = Responses();
  no_input.erase("input");
  ExpectResponsesRefused(no_input, "input", "required");
}

TEST(ResponsesApiTest, ParamsAreRenamedToTheResponsesFields) {
  EXPECT_EQ(ResponsesParam("max_tokens"), "max_output_tokens");
  EXPECT_EQ(ResponsesParam("response_format.json_schema.schema"), "text.format");
  EXPECT_EQ(ResponsesParam("reasoning_effort"), "reasoning.effort");
  EXPECT_EQ(ResponsesParam("temperature"), "temperature");
}

}  // namespace
}  // namespace spark::engine::server
