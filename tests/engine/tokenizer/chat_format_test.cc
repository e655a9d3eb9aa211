// Compares the C++ chat formats with the prompts Python jinja2 renders from the real templates
// (scripts/fixtures/make_chat_fixtures.py), and checks request parsing and format detection.
#include <gtest/gtest.h>

#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/py_json.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixture_util.h"

namespace spark::tokenizer {
namespace {

using nlohmann::ordered_json;
using testing::FixtureDir;
using testing::ReadJson;

constexpr const char* kDeepSeekBos = "<｜begin▁of▁sentence｜>";

class ChatFormatFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatFormatFixtureTest, RenderMatchesJinja) {
  const ordered_json fixture = ReadJson(FixtureDir() / "chat" / (GetParam() + ".json"));
  Result<std::unique_ptr<ChatFormat>> format = MakeChatFormat(GetParam(), kDeepSeekBos);
  ASSERT_TRUE(format.ok()) << format.status().ToString();
  ASSERT_GE(fixture["cases"].size(), 20u);
  for (const auto& c : fixture["cases"]) {
    Result<ChatRequest> request = ParseChatRequest(c["request"]);
    ASSERT_TRUE(request.ok()) << c["name"] << ": " << request.status().ToString();
    Result<std::string> prompt = (*format)->Render(*request);
    ASSERT_TRUE(prompt.ok()) << c["name"] << ": " << prompt.status().ToString();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>()) << "conversation " << c["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ChatFormatFixtureTest,
                         ::testing::Values("deepseek_v3", "deepseek_v4", "qwen3"));

TEST(ChatFormatTest, DetectsFormatOfRealTemplates) {
  for (const auto& [dir, want] : {std::pair{"deepseek_v3", "deepseek_v3"}, {"qwen3", "qwen3"}}) {
    const auto path = testing::RealTokenizerDir(dir) / "tokenizer_config.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "real tokenizer not found at " << path;
    const std::string chat_template = ReadJson(path)["chat_template"];
    Result<std::string> name = DetectChatFormat(chat_template);
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    EXPECT_EQ(*name, want);
  }
}

TEST(ChatFormatTest, DetectsV4StyleAndRejectsUnknown) {
  std::ifstream in(FixtureDir() / "chat" / "deepseek_v4.jinja");
  const std::string v4((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(DetectChatFormat(v4).value_or(""), "deepseek_v4");
  EXPECT_EQ(DetectChatFormat("{{ messages }}").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MakeChatFormat("llama", "").status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatFormatTest, ParseRequestNamesBadKey) {
  const auto bad_role = ordered_json::parse(R"({"messages": [{"role": "robot", "content": "x"}]})");
  Result<ChatRequest> r = ParseChatRequest(bad_role);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages[0].role"), std::string::npos) << r.status().message();
  const auto bad_call = ordered_json::parse(
      R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"type": "function"}]}]})");
  r = ParseChatRequest(bad_call);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages[0].tool_calls[0]"), std::string::npos);
  EXPECT_FALSE(ParseChatRequest(ordered_json::parse(R"({"messages": []})")).ok());
}

TEST(ChatFormatTest, ParseRequestRefusesImagesAsTextOnly) {
  const auto body = ordered_json::parse(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "what is it"},
          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})");
  Result<ChatRequest> r = ParseChatRequest(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("messages[0].content[1]: \"image_url\" parts are not "
                                      "supported: this engine serves text only"),
            std::string::npos)
      << r.status().message();
}

TEST(ChatFormatTest, ParseRequestJoinsTextParts) {
  const auto body = ordered_json::parse(
      R"({"messages": [{"role": "developer", "content": "sys"}, {"role": "user", "content":
          [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  Result<ChatRequest> r = ParseChatRequest(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(*r->messages[1].content, "a\nb");
}

TEST(ChatFormatTest, MarkersNameStopTokens) {
  auto qwen = MakeChatFormat("qwen3", "");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ((*qwen)->markers().stop_tokens.front(), "<|im_end|>");
  EXPECT_EQ((*qwen)->markers().tool_call_begin, "<tool_call>");
  auto ds = MakeChatFormat("deepseek_v4", kDeepSeekBos);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->markers().stop_tokens.front(), "<｜end▁of▁sentence｜>");
  EXPECT_EQ((*ds)->markers().think_end, "</think>");
}

// The forced-call prefill must be the start of the call markup the format itself renders for an
// assistant turn that calls the function (what the model was trained to continue), and must
// begin with the format's call markers so the output parser sees a call.
class ForcedToolCallTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ForcedToolCallTest, PrefillStartsTheRenderedCall) {
  auto format = MakeChatFormat(GetParam(), kDeepSeekBos);
  ASSERT_TRUE(format.ok());
  Result<ChatRequest> turn = ParseChatRequest(ordered_json::parse(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}]})"));
  ASSERT_TRUE(turn.ok()) << turn.status().ToString();
  turn->add_generation_prompt = false;
  Result<std::string> rendered = (*format)->Render(*turn);
  ASSERT_TRUE(rendered.ok());
  const ToolCallPrefill named = (*format)->ForcedToolCall(*turn, "get_weather");
  const ToolCallPrefill any = (*format)->ForcedToolCall(*turn, "");
  EXPECT_NE(rendered->find(named.markup), std::string::npos) << *rendered << "\n" << named.markup;
  EXPECT_TRUE(named.markup.starts_with(any.markup));
  EXPECT_NE(named.markup.find("get_weather"), std::string::npos);
  const ChatMarkers& m = (*format)->markers();
  EXPECT_TRUE(
      any.markup.starts_with(m.tool_calls_begin.empty() ? m.tool_call_begin : m.tool_calls_begin));
}

// With thinking on, the prefill closes the think block the way the format's own "thinking
// off" generation prompt does; with thinking off there is nothing to close.
TEST_P(ForcedToolCallTest, PrefillSkipsReasoning) {
  auto format = MakeChatFormat(GetParam(), kDeepSeekBos);
  ASSERT_TRUE(format.ok());
  const bool v4 = GetParam() == "deepseek_v4";
  const char* key = GetParam() == "qwen3" ? "enable_thinking" : "thinking";
  Result<ChatRequest> on = ParseChatRequest(ordered_json::parse(
      std::string(
          R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {")") +
      key + "\": true}}"));
  Result<ChatRequest> off = ParseChatRequest(ordered_json::parse(
      std::string(
          R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {")") +
      key + "\": false}}"));
  ASSERT_TRUE(on.ok() && off.ok());
  Result<std::string> on_text = (*format)->Render(*on);
  Result<std::string> off_text = (*format)->Render(*off);
  ASSERT_TRUE(on_text.ok() && off_text.ok());
  const std::string suffix = (*format)->ForcedToolCall(*on, "f").prompt_suffix;
  if (GetParam() == "deepseek_v3") {
    EXPECT_EQ(suffix, "");  // No thinking switch.
  } else if (v4) {
    EXPECT_TRUE(on_text->ends_with("<think>"));  // An empty think block, then the call.
    EXPECT_EQ(suffix, "</think>");
  } else {
    EXPECT_EQ(*on_text + suffix, *off_text);
  }
  EXPECT_EQ((*format)->ForcedToolCall(*off, "f").prompt_suffix, "");
}

INSTANTIATE_TEST_SUITE_P(Formats, ForcedToolCallTest,
                         ::testing::Values("deepseek_v3", "deepseek_v4", "qwen3"));

// Expected strings are what Python's json.dumps(x, ensure_ascii=False) prints.
TEST(PyJsonTest, MatchesPythonJsonDumps) {
  const std::pair<const char*, const char*> kCases[] = {
      {R"({"b": 1, "a": [true, null, "x"]})", R"({"b": 1, "a": [true, null, "x"]})"},
      {"[0.5, 1.0, 1e-07, 1e+16, 123456789012345.0, -2.5e-05, 0.0001]",
       "[0.5, 1.0, 1e-07, 1e+16, 123456789012345.0, -2.5e-05, 0.0001]"},
      {R"(["é😀", "q\"b\\t\t\u0001"])", R"(["é😀", "q\"b\\t\t\u0001"])"},
      {"{}", "{}"},
  };
  for (const auto& [input, want] : kCases) {
    EXPECT_EQ(PyJsonDumps(ordered_json::parse(input)), want) << input;
  }
}

}  // namespace
}  // namespace spark::tokenizer
