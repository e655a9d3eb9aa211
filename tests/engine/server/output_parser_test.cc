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

struct ReasoningCase {
  std::string text;
  bool in_reasoning;
  std::string reasoning;
  std::string content;
};

TEST(ReasoningParserTest, SplitsAtAnyChunking) {
  const std::vector<ReasoningCase> cases = {
      // Whitespace is kept as the tokens carry it (vLLM's reasoning parsers return it too).
      {"<think>\nabc\n</think>\n\nanswer", false, "\nabc\n", "\n\nanswer"},
      {"  leading spaces", false, "", "  leading spaces"},
      {"plain answer", false, "", "plain answer"},
      {"abc</think>answer", true, "abc", "answer"},
      {"<think>never closed", false, "never closed", ""},
      {"a < b </thin and </think> done", true, "a < b </thin and ", " done"},
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

// Feeds `text` cut at `cuts` (ascending offsets) and returns each Push's output, then Finish's.
std::vector<ParsedOutput> Feed(const tokenizer::ChatMarkers& m, const std::string& text,
                               const std::vector<size_t>& cuts) {
  ToolCallParser p(m);
  std::vector<ParsedOutput> outs;
  size_t from = 0;
  for (size_t cut : cuts) {
    outs.push_back(p.Push(text.substr(from, cut - from)));
    from = cut;
  }
  outs.push_back(p.Push(text.substr(from)));
  outs.push_back(p.Finish());
  return outs;
}

// What a client rebuilds from the stream: content concatenated; per call index the name of its
// first piece and the concatenated argument pieces. Fails the test when the stream breaks the
// protocol (a call's first piece without `begin`, a name on a later piece, an index out of
// order).
ParsedOutput Reassemble(const std::vector<ParsedOutput>& outs, const std::string& where) {
  ParsedOutput r;
  for (const ParsedOutput& o : outs) {
    r.content += o.content;
    for (const ToolCallDelta& d : o.tool_calls) {
      if (d.begin) {
        EXPECT_EQ(d.index, static_cast<int>(r.tool_calls.size())) << where;
        EXPECT_FALSE(d.name.empty()) << where;
        r.tool_calls.push_back({d.index, true, d.name, d.arguments});
      } else {
        EXPECT_TRUE(d.name.empty()) << where;
        if (r.tool_calls.empty()) {
          ADD_FAILURE() << where << ": arguments before the call began";
          continue;
        }
        EXPECT_EQ(d.index, r.tool_calls.back().index) << where;
        r.tool_calls.back().arguments += d.arguments;
      }
    }
  }
  return r;
}

struct ToolCase {
  const tokenizer::ChatMarkers* markers;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const std::vector<ToolCase>& ToolCases() {
  static const std::vector<ToolCase> cases = {
      {&kQwen,
       "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\", \"days\": [1, {\"x\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"now\", \"arguments\": {}}\n</tool_call>",
       "Let me check.",
       {{"get_weather", "{\"city\": \"Paris\", \"days\": [1, {\"x\": \"}\"}]}"}, {"now", "{}"}}},
      // Arguments before the name: parsed whole at the end marker.
      {&kQwen,
       "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>",
       "",
       {{"f", "{\"a\":1}"}}},
      {&kQwen,
       "<tool_call>not json</tool_call> after",
       "<tool_call>not json</tool_call> after",
       {}},
      {&kQwen, "x <tool_call>{\"name\": \"a\"", "x <tool_call>{\"name\": \"a\"", {}},
      {&kQwen, "a <b> <tool", "a <b> <tool", {}},
      {&kQwen, "cut <tool_call>", "cut <tool_call>", {}},
      // The model stops inside the arguments: the call stands with what it wrote.
      {&kQwen,
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"ab",
       "",
       {{"f", "{\"q\": \"ab"}}},
      {&kDeepSeek,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
       "now\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "",
       {{"get_weather", "{\"city\": \"Paris\"}"}, {"now", "{}"}}},
      {&kDeepSeek,
       "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
       "<｜tool▁call▁end｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
       "<｜tool▁calls▁end｜>",
       "ok",
       {{"get_weather", "{\"city\": \"Oslo\"}"}, {"now", "{}"}}},
  };
  return cases;
}

TEST(ToolCallParserTest, WholeTextGivesTheExpectedCalls) {
  for (const ToolCase& c : ToolCases()) {
    ParsedOutput out = Reassemble(Feed(*c.markers, c.text, {}), c.text);
    EXPECT_EQ(out.content, c.content) << c.text;
    ASSERT_EQ(out.tool_calls.size(), c.calls.size()) << c.text;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(out.tool_calls[i].name, c.calls[i].first) << c.text;
      EXPECT_EQ(out.tool_calls[i].arguments, c.calls[i].second) << c.text;
    }
  }
}

// A stream cut at any byte, or fed byte by byte, reassembles to the non-streamed result.
TEST(ToolCallParserTest, StreamAtEveryCutEqualsWholeResult) {
  for (const ToolCase& c : ToolCases()) {
    std::vector<size_t> every;
    for (size_t k = 1; k < c.text.size(); ++k) every.push_back(k);
    std::vector<std::vector<size_t>> splits = {every};
    for (size_t k = 0; k <= c.text.size(); ++k) splits.push_back({k});
    for (const auto& cuts : splits) {
      const std::string where = c.text + " cut at " +
                                std::to_string(cuts.size() == 1 ? cuts[0] : 0) +
                                (cuts.size() > 1 ? " (every byte)" : "");
      ParsedOutput out = Reassemble(Feed(*c.markers, c.text, cuts), where);
      EXPECT_EQ(out.content, c.content) << where;
      ASSERT_EQ(out.tool_calls.size(), c.calls.size()) << where;
      for (size_t i = 0; i < c.calls.size(); ++i) {
        EXPECT_EQ(out.tool_calls[i].name, c.calls[i].first) << where;
        EXPECT_EQ(out.tool_calls[i].arguments, c.calls[i].second) << where;
      }
    }
  }
}

// Fed byte by byte, the name goes out before the arguments are complete, and the arguments in
// several pieces as they arrive.
TEST(ToolCallParserTest, ArgumentsStreamAsTheyArrive) {
  const std::string text =
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"long "
      "text\"}}\n</tool_call>";
  const size_t args_close = text.find("}}");
  ToolCallParser p(kQwen);
  size_t begin_at = 0, argument_pieces = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    ParsedOutput out = p.Push(text.substr(i, 1));
    for (const ToolCallDelta& d : out.tool_calls) {
      if (d.begin) {
        begin_at = i;
        EXPECT_EQ(d.name, "search");
      }
      if (!d.arguments.empty() && i < args_close) ++argument_pieces;
    }
  }
  EXPECT_EQ(begin_at, text.find("{\"query\""));  // As soon as the arguments open.
  EXPECT_GE(argument_pieces, 10u);
}

TEST(ToolCallParserTest, AppendMergesPiecesOfOneCall) {
  ParsedOutput total;
  total.Append({"", "", {{0, true, "f", ""}}});
  total.Append({"", "", {{0, false, "", "{\"a\""}}});
  total.Append({"", "", {{0, false, "", ": 1}"}, {1, true, "g", "{}"}}});
  ASSERT_EQ(total.tool_calls.size(), 2u);
  EXPECT_EQ(total.tool_calls[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(total.tool_calls[1].name, "g");
}

TEST(PartialMarkerSuffixTest, LongestPrefixOfAnyMarker) {
  EXPECT_EQ(PartialMarkerSuffix("abc<to", {"<tool_call>"}), 3u);
  EXPECT_EQ(PartialMarkerSuffix("abc", {"<tool_call>"}), 0u);
  EXPECT_EQ(PartialMarkerSuffix("x</", {"<think>", "</think>"}), 2u);
  EXPECT_EQ(PartialMarkerSuffix("<tool_call>", {"<tool_call>"}), 0u);  // Whole: not partial.
}

}  // namespace
}  // namespace spark::engine::server
