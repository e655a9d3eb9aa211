// Output parsers: split a model's generated text, as it streams in, into reasoning, content and
// tool calls. Both are incremental state machines: Push() takes the next piece of text and
// returns what can be emitted now; text that may be the start of a marker ("</thi") is held
// back until the next piece decides. Finish() flushes at the end of generation.
//   ReasoningParser: <think> ... </think> (the prompt may already have opened the block).
//   ToolCallParser:  Qwen3  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//                    DeepSeek V3 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
//                                 \n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                    DeepSeek V4  <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//   A tool call is emitted whole once its end marker arrives; a call whose body does not parse
//   is passed through as content.
// Thread-safety: one parser per generated sequence; not safe for concurrent use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/chat_format.h"

namespace spark::engine::server {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object.
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void Append(ParsedOutput other);
};

// Holds back a possible partial marker: the longest suffix of `text` that is a proper prefix of
// any marker. Returns its length.
size_t PartialMarkerSuffix(std::string_view text, const std::vector<std::string>& markers);

class ReasoningParser {
 public:
  // `in_reasoning`: the prompt ended inside an open think block (DeepSeek V4 with thinking).
  ReasoningParser(std::string begin, std::string end, bool in_reasoning);
  ParsedOutput Push(std::string_view text);
  ParsedOutput Finish();

 private:
  enum class State { kStart, kReasoning, kContent };
  ParsedOutput Drain(bool final);

  const std::string begin_;
  const std::string end_;
  State state_;
  std::string buffer_;
  bool strip_leading_ = true;  // Drop whitespace at the start of each part.
};

class ToolCallParser {
 public:
  explicit ToolCallParser(const tokenizer::ChatMarkers& markers);
  ParsedOutput Push(std::string_view text);
  ParsedOutput Finish();
  int num_calls() const { return num_calls_; }

 private:
  enum class State { kContent, kSection, kCall };
  // Consumes as much of buffer_ as the current state allows; false when it needs more text.
  bool Step(ParsedOutput& out, bool final);
  bool StepContent(ParsedOutput& out, bool final);
  bool StepSection(ParsedOutput& out, bool final);
  bool StepCall(ParsedOutput& out, bool final);
  void EmitContent(ParsedOutput& out, std::string text);
  bool ParseCall(std::string_view body, ParsedToolCall& call) const;

  const tokenizer::ChatMarkers markers_;
  State state_ = State::kContent;
  std::string buffer_;
  std::string pending_space_;  // Whitespace after a call, sent only if content follows.
  bool in_section_ = false;  // Inside <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>.
  int num_calls_ = 0;
};

}  // namespace spark::engine::server
