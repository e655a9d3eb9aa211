// Output parsers: split a model's generated text, as it streams in, into reasoning, content and
// tool calls. Both are incremental state machines: Push() takes the next piece of text and
// returns what can be emitted now; text that may be the start of a marker ("</thi") is held
// back until the next piece decides. Finish() flushes at the end of generation.
//   ReasoningParser: <think> ... </think> (the prompt may already have opened the block).
//   ToolCallParser:  Qwen3  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//                    DeepSeek V3 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
//                                 \n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                    DeepSeek V4  <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//   A call streams: once its head (the name, up to the `{` that opens the arguments) has
//   arrived, a ToolCallDelta with `begin` and the name is emitted, then the argument text as the
//   model writes it, up to the brace that closes the object. The decision depends only on the
//   text, never on how it was split, so a stream reassembled per call index equals the result
//   of parsing the whole text at once. A call whose head does not match waits for its end marker
//   and is then parsed whole, or passed through as content when it does not parse.
// Thread-safety: one parser per generated sequence; not safe for concurrent use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/chat_format.h"

namespace spark::engine::server {

// One piece of tool call `index` (0, 1, ... in the order the model wrote them). The first piece
// of a call has `begin` set and carries the name; the arguments of a call are the concatenation
// of the `arguments` of its pieces (JSON text of the arguments object).
struct ToolCallDelta {
  int index = 0;
  bool begin = false;
  std::string name;
  std::string arguments;
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  // Pieces in order; Append merges a piece into the previous one of the same call, so an
  // output accumulated over a whole generation holds one entry per call.
  std::vector<ToolCallDelta> tool_calls;

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
  std::string buffer_;  // Whitespace is kept as the tokens carry it, as vLLM does.
};

class ToolCallParser {
 public:
  explicit ToolCallParser(const tokenizer::ChatMarkers& markers);
  ParsedOutput Push(std::string_view text);
  ParsedOutput Finish();
  int num_calls() const { return num_calls_; }

 private:
  enum class State { kContent, kSection, kCall };
  // Within a call: before the arguments, inside them, after them (up to the end marker).
  enum class Part { kHead, kArguments, kTail };
  enum class Match { kNeedMore, kMismatch, kMatched };
  struct Head {
    Match match = Match::kNeedMore;
    std::string name;
    size_t arguments_at = 0;  // Offset of the `{` that opens the arguments.
  };

  // Consumes as much of buffer_ as the current state allows; false when it needs more text.
  bool Step(ParsedOutput& out, bool final);
  bool StepContent(ParsedOutput& out, bool final);
  bool StepSection(ParsedOutput& out, bool final);
  bool StepCall(ParsedOutput& out, bool final);
  bool StepHead(ParsedOutput& out, bool final);
  bool StepArguments(ParsedOutput& out, bool final);
  bool StepTail(bool final);
  void EndCall();
  void EmitContent(ParsedOutput& out, std::string text);
  Head MatchHead(std::string_view body) const;
  bool ParseCall(std::string_view body, ToolCallDelta& call) const;

  const tokenizer::ChatMarkers markers_;
  State state_ = State::kContent;
  std::string buffer_;
  std::string pending_space_;  // Whitespace after a call, sent only if content follows.
  bool in_section_ = false;  // Inside <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>.
  int num_calls_ = 0;        // Calls finished; the call in progress has this index.
  Part part_ = Part::kHead;
  int depth_ = 0;  // Nesting of the arguments' JSON so far, outside strings.
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace spark::engine::server
