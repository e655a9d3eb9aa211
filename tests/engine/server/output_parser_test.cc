#include "engine/server/output_parser.h"

#include <gtest/gtest.h>

namespace spark::engine::server {
namespace {

const tokenizer::ChatMarkers kQwen{{}, "<think>",     "</think>",     "",
                                   "", "<tool_call>", "</tool_call>", ""};
const tokenizer::ChatMarkers kDeepSeek{{},
                                       "<think>",
                                       "</think>",
                                       "<｜tool▁calls▁begin｜>",
                                       "<｜tool▁calls▁end｜>",
                                       "<｜tool▁call▁begin｜>",
                                       "<｜tool▁call▁end｜>",
                                       "<｜tool▁sep｜>"};

// Feeds `text` in pieces of `step` bytes (0 = whole) and concatenates the outputs.
ParsedOutput RunReasoning(const std::string& text, bool in_reasoning, size_t step) {
  ReasoningParser p("<think>", "</think>", in_reasoning);
  ParsedOutput out;
  if (step == 0) step = text.size();
  for (size_t i = 0; i < text.size(); i += step) out.Append(p.Push(text.substr(i, step)));
  out.Append(p.Finish());
  return out;
}

ParsedOutput RunTools(const tokenizer::ChatMarkers& m, const std::string& text, size_t step) {
  ToolCallParser p(m);
  ParsedOutput out;
  if (step == 0) step = text.size();
  for (size_t i = 0; i < text.size(); i += step) out.Append(p.Push(text.substr(i, step)));
  out.Append(p.Finish());
  return out;
}

struct ReasoningCase {
  std::string text;
  bool in_reasoning;
  std::string reasoning;
  std::string content;
};

TEST(ReasoningParserTest, SplitsAtAnyChunking) {
  const std::vector<ReasoningCase> cases = {
      {"<think>\nabc\n</think>\n\nanswer", false, "abc\n", "answer"},
      {"plain answer", false, "", "plain answer"},
      {"abc</think>answer", true, "abc", "answer"},
      {"<think>never closed", false, "never closed", ""},
      {"a < b </thin and </think> done", true, "a < b </thin and ", "done"},
      {"<thinking is not a tag", false, "", "<thinking is not a tag"},
  };
  for (const ReasoningCase& c : cases) {
    for (size_t step : {0, 1, 2, 3, 7}) {
      ParsedOutput out = RunReasoning(c.text, c.in_reasoning, step);
      EXPECT_EQ(out.reasoning, c.reasoning) << c.text << " step " << step;
      EXPECT_EQ(out.content, c.content) << c.text << " step " << step;
    }
  }
}

TEST(ReasoningParserTest, HoldsBackOnlyPossibleMarkers) {
  ReasoningParser p("<think>", "</think>", true);
  EXPECT_EQ(p.Push("abc</th").reasoning, "abc");
  ParsedOutput out = p.Push("x");
  EXPECT_EQ(out.reasoning, "</thx");
}

TEST(ToolCallParserTest, QwenCallsAtAnyChunking) {
  const std::string text =
      "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  for (size_t step : {0, 1, 2, 5, 11}) {
    ParsedOutput out = RunTools(kQwen, text, step);
    EXPECT_EQ(out.content, "Let me check.") << step;
    ASSERT_EQ(out.tool_calls.size(), 2u) << step;
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(out.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(out.tool_calls[1].name, "now");
    EXPECT_EQ(out.tool_calls[1].arguments, "{}");
  }
}

TEST(ToolCallParserTest, DeepSeekV3Format) {
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": "
      "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n"
      "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (size_t step : {0, 1, 3, 13}) {
    ParsedOutput out = RunTools(kDeepSeek, text, step);
    EXPECT_EQ(out.content, "") << step;
    ASSERT_EQ(out.tool_calls.size(), 2u) << step;
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(out.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(out.tool_calls[1].name, "now");
  }
}

TEST(ToolCallParserTest, DeepSeekV4Format) {
  const std::string text =
      "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (size_t step : {0, 1, 4}) {
    ParsedOutput out = RunTools(kDeepSeek, text, step);
    EXPECT_EQ(out.content, "ok");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(out.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
  }
}

TEST(ToolCallParserTest, MalformedOrUnfinishedCallsStayContent) {
  ParsedOutput bad = RunTools(kQwen, "<tool_call>not json</tool_call>", 1);
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>not json</tool_call>");
  ParsedOutput cut = RunTools(kQwen, "x <tool_call>{\"name\": \"a\"", 2);
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_EQ(cut.content, "x <tool_call>{\"name\": \"a\"");
  ParsedOutput lt = RunTools(kQwen, "a <b> <tool", 1);
  EXPECT_EQ(lt.content, "a <b> <tool");
}

TEST(PartialMarkerSuffixTest, LongestPrefixOfAnyMarker) {
  EXPECT_EQ(PartialMarkerSuffix("abc<to", {"<tool_call>"}), 3u);
  EXPECT_EQ(PartialMarkerSuffix("abc", {"<tool_call>"}), 0u);
  EXPECT_EQ(PartialMarkerSuffix("x</", {"<think>", "</think>"}), 2u);
  EXPECT_EQ(PartialMarkerSuffix("<tool_call>", {"<tool_call>"}), 0u);  // Whole: not partial.
}

}  // namespace
}  // namespace spark::engine::server
