#include "engine/server/output_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace spark::engine::server {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool AllSpace(std::string_view s) { return std::all_of(s.begin(), s.end(), IsSpace); }

// The arguments as compact JSON when they parse, else the text as the model wrote it.
std::string NormaliseArguments(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::string(text);
  return j.is_string() ? j.get<std::string>() : j.dump();
}

// Reads the fixed head of a call ({"name": "N", "arguments": {) piece by piece.
class HeadScanner {
 public:
  enum Match { kNeedMore, kMismatch, kMatched };
  explicit HeadScanner(std::string_view text) : text_(text) {}

  size_t SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
    return pos_;
  }
  // The next text (after whitespace) is `literal`.
  Match Literal(std::string_view literal) {
    const std::string_view rest = text_.substr(SkipSpace());
    if (rest.size() < literal.size()) return literal.starts_with(rest) ? kNeedMore : kMismatch;
    if (!rest.starts_with(literal)) return kMismatch;
    pos_ += literal.size();
    return kMatched;
  }
  // A JSON string; its value goes to *value.
  Match String(std::string* value) {
    SkipSpace();
    if (pos_ >= text_.size()) return kNeedMore;
    if (text_[pos_] != '"') return kMismatch;
    bool escaped = false;
    for (size_t j = pos_ + 1; j < text_.size(); ++j) {
      if (escaped) {
        escaped = false;
      } else if (text_[j] == '\\') {
        escaped = true;
      } else if (text_[j] == '"') {
        nlohmann::json s = nlohmann::json::parse(text_.substr(pos_, j + 1 - pos_), nullptr, false);
        if (!s.is_string()) return kMismatch;
        *value = s.get<std::string>();
        pos_ = j + 1;
        return kMatched;
      }
    }
    return kNeedMore;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

void ParsedOutput::Append(ParsedOutput other) {
  reasoning += other.reasoning;
  content += other.content;
  for (ToolCallDelta& d : other.tool_calls) {
    if (!d.begin && !tool_calls.empty() && tool_calls.back().index == d.index) {
      tool_calls.back().arguments += d.arguments;
    } else {
      tool_calls.push_back(std::move(d));
    }
  }
}

size_t PartialMarkerSuffix(std::string_view text, const std::vector<std::string>& markers) {
  size_t best = 0;
  for (const std::string& m : markers) {
    if (m.empty()) continue;
    const size_t max_len = std::min(text.size(), m.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.substr(text.size() - len) == std::string_view(m).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// ---- ReasoningParser ----

ReasoningParser::ReasoningParser(std::string begin, std::string end, bool in_reasoning)
    : begin_(std::move(begin)),
      end_(std::move(end)),
      state_(in_reasoning ? State::kReasoning : State::kStart) {}

ParsedOutput ReasoningParser::Push(std::string_view text) {
  buffer_ += text;
  return Drain(false);
}

ParsedOutput ReasoningParser::Finish() { return Drain(true); }

ParsedOutput ReasoningParser::Drain(bool final) {
  ParsedOutput out;
  if (state_ == State::kStart) {
    if (!begin_.empty() && buffer_.starts_with(begin_)) {
      buffer_.erase(0, begin_.size());
      state_ = State::kReasoning;
      return Drain(final);
    }
    if (!final && !begin_.empty() && std::string_view(begin_).starts_with(buffer_)) return out;
    state_ = State::kContent;
  }
  if (state_ == State::kReasoning) {
    const size_t pos = end_.empty() ? std::string::npos : buffer_.find(end_);
    if (pos != std::string::npos) {
      out.reasoning = buffer_.substr(0, pos);
      buffer_.erase(0, pos + end_.size());
      state_ = State::kContent;
      out.Append(Drain(final));
      return out;
    }
    const size_t keep = final ? 0 : PartialMarkerSuffix(buffer_, {end_});
    out.reasoning = buffer_.substr(0, buffer_.size() - keep);
    buffer_.erase(0, buffer_.size() - keep);
    return out;
  }
  out.content = std::exchange(buffer_, std::string());
  return out;
}

// ---- ToolCallParser ----

ToolCallParser::ToolCallParser(const tokenizer::ChatMarkers& markers) : markers_(markers) {}

ParsedOutput ToolCallParser::Push(std::string_view text) {
  buffer_ += text;
  ParsedOutput out;
  while (Step(out, false)) {
  }
  return out;
}

ParsedOutput ToolCallParser::Finish() {
  ParsedOutput out;
  while (Step(out, true)) {
  }
  if (state_ == State::kCall && part_ == Part::kHead) {  // A call begun, not even its head.
    EmitContent(out, markers_.tool_call_begin + std::exchange(buffer_, std::string()));
    state_ = State::kContent;
  }
  if (!buffer_.empty()) EmitContent(out, std::exchange(buffer_, std::string()));
  return out;
}

bool ToolCallParser::Step(ParsedOutput& out, bool final) {
  if (buffer_.empty()) return false;
  switch (state_) {
    case State::kContent:
      return StepContent(out, final);
    case State::kSection:
      return StepSection(out, final);
    case State::kCall:
      return StepCall(out, final);
  }
  return false;
}

bool ToolCallParser::StepContent(ParsedOutput& out, bool final) {
  const std::string& section = markers_.tool_calls_begin;
  const std::string& call = markers_.tool_call_begin;
  const size_t s = section.empty() ? std::string::npos : buffer_.find(section);
  const size_t c = call.empty() ? std::string::npos : buffer_.find(call);
  if (s == std::string::npos && c == std::string::npos) {
    const size_t keep = final ? 0 : PartialMarkerSuffix(buffer_, {section, call});
    EmitContent(out, buffer_.substr(0, buffer_.size() - keep));
    buffer_.erase(0, buffer_.size() - keep);
    return false;
  }
  const bool is_section = s != std::string::npos && (c == std::string::npos || s <= c);
  const size_t pos = is_section ? s : c;
  EmitContent(out, buffer_.substr(0, pos));
  buffer_.erase(0, pos + (is_section ? section.size() : call.size()));
  state_ = is_section ? State::kSection : State::kCall;
  in_section_ = is_section;
  return true;
}

bool ToolCallParser::StepSection(ParsedOutput& out, bool final) {
  const size_t n = buffer_.find_first_not_of(" \n\r\t");
  if (n == std::string::npos) return false;
  std::string_view rest = std::string_view(buffer_).substr(n);
  const std::string& call = markers_.tool_call_begin;
  const std::string& end = markers_.tool_calls_end;
  if (rest.starts_with(call)) {
    buffer_.erase(0, n + call.size());
    state_ = State::kCall;
    return true;
  }
  if (!end.empty() && rest.starts_with(end)) {
    buffer_.erase(0, n + end.size());
    state_ = State::kContent;
    in_section_ = false;
    return true;
  }
  if (!final &&
      (std::string_view(call).starts_with(rest) || std::string_view(end).starts_with(rest))) {
    return false;
  }
  state_ = State::kContent;  // Not markup after all: the rest is content.
  in_section_ = false;
  (void)out;
  return true;
}

bool ToolCallParser::StepCall(ParsedOutput& out, bool final) {
  switch (part_) {
    case Part::kHead:
      return StepHead(out, final);
    case Part::kArguments:
      return StepArguments(out, final);
    case Part::kTail:
      return StepTail(final);
  }
  return false;
}

// Before the arguments: stream the call once its head matches; otherwise wait for the end
// marker and parse the call whole.
bool ToolCallParser::StepHead(ParsedOutput& out, bool final) {
  const size_t end = buffer_.find(markers_.tool_call_end);
  const std::string_view body =
      std::string_view(buffer_).substr(0, end == std::string::npos ? buffer_.size() : end);
  const Head head = MatchHead(body);
  if (head.match == Match::kMatched) {
    out.Append({{}, {}, {{num_calls_, true, head.name, ""}}});
    buffer_.erase(0, head.arguments_at);
    part_ = Part::kArguments;
    depth_ = 0;
    in_string_ = escaped_ = false;
    return true;
  }
  if (end == std::string::npos) {
    if (!final) return false;
    EmitContent(out, markers_.tool_call_begin + std::exchange(buffer_, std::string()));
    state_ = State::kContent;
    return false;
  }
  ToolCallDelta call{num_calls_, true, "", ""};
  if (ParseCall(body, call)) {
    pending_space_.clear();
    out.Append({{}, {}, {std::move(call)}});
    buffer_.erase(0, end + markers_.tool_call_end.size());
    EndCall();
    return true;
  }
  EmitContent(out, markers_.tool_call_begin + std::string(body) + markers_.tool_call_end);
  buffer_.erase(0, end + markers_.tool_call_end.size());
  state_ = in_section_ ? State::kSection : State::kContent;
  return true;
}

// Inside the arguments: pass text on up to the brace that closes them (or the end marker, if
// the model ends the call early).
bool ToolCallParser::StepArguments(ParsedOutput& out, bool final) {
  const std::string& marker = markers_.tool_call_end;
  size_t i = 0;
  bool ended = false, complete = false;
  for (; i < buffer_.size(); ++i) {
    const char ch = buffer_[i];
    if (ch == marker.front()) {
      const std::string_view rest = std::string_view(buffer_).substr(i);
      if (rest.starts_with(marker)) {
        ended = true;
        break;
      }
      if (!final && std::string_view(marker).starts_with(rest)) break;  // Maybe the marker.
    }
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (ch == '\\')
        escaped_ = true;
      else if (ch == '"')
        in_string_ = false;
    } else if (ch == '"') {
      in_string_ = true;
    } else if (ch == '{' || ch == '[') {
      ++depth_;
    } else if ((ch == '}' || ch == ']') && --depth_ == 0) {
      ++i;
      complete = true;
      break;
    }
  }
  if (i > 0) out.Append({{}, {}, {{num_calls_, false, "", buffer_.substr(0, i)}}});
  buffer_.erase(0, i);
  if (ended) {
    buffer_.erase(0, marker.size());
    EndCall();
    return true;
  }
  if (complete) {
    part_ = Part::kTail;
    return true;
  }
  if (final) EndCall();
  return false;
}

// After the arguments: whatever comes before the end marker (the Qwen3 object's closing brace,
// DeepSeek V3's closing fence) is not part of the call's result.
bool ToolCallParser::StepTail(bool final) {
  const std::string& marker = markers_.tool_call_end;
  const size_t end = buffer_.find(marker);
  if (end != std::string::npos) {
    buffer_.erase(0, end + marker.size());
    EndCall();
    return true;
  }
  if (final) {
    buffer_.clear();
    EndCall();
    return false;
  }
  buffer_.erase(0, buffer_.size() - PartialMarkerSuffix(buffer_, {marker}));
  return false;
}

void ToolCallParser::EndCall() {
  pending_space_.clear();
  ++num_calls_;
  part_ = Part::kHead;
  state_ = in_section_ ? State::kSection : State::kContent;
}

void ToolCallParser::EmitContent(ParsedOutput& out, std::string text) {
  if (text.empty()) return;
  if (num_calls_ > 0 && AllSpace(text)) {
    pending_space_ += text;
    return;
  }
  out.content += std::exchange(pending_space_, std::string()) + text;
}

ToolCallParser::Head ToolCallParser::MatchHead(std::string_view body) const {
  Head head;
  auto convert = [](HeadScanner::Match m) {
    return m == HeadScanner::kMatched    ? Match::kMatched
           : m == HeadScanner::kNeedMore ? Match::kNeedMore
                                         : Match::kMismatch;
  };
  const std::string& sep = markers_.tool_sep;
  if (sep.empty()) {  // Qwen3: {"name": "N", "arguments": {
    HeadScanner s(body);
    using M = HeadScanner::Match;
    M m = s.Literal("{");
    if (m == M::kMatched) m = s.Literal("\"name\"");
    if (m == M::kMatched) m = s.Literal(":");
    if (m == M::kMatched) m = s.String(&head.name);
    if (m == M::kMatched) m = s.Literal(",");
    if (m == M::kMatched) m = s.Literal("\"arguments\"");
    if (m == M::kMatched) m = s.Literal(":");
    head.arguments_at = s.SkipSpace();
    if (m == M::kMatched) m = s.Literal("{");
    head.match = convert(m);
    return head;
  }
  const size_t pos = body.find(sep);
  if (pos == std::string_view::npos) return head;  // Need more.
  const size_t after = pos + sep.size();
  const size_t first = body.find_first_not_of(" \n\r\t", after);
  if (first == std::string_view::npos) return head;
  if (body[first] == '{') {  // V4: N<sep>{
    head.name = std::string(TrimView(body.substr(0, pos)));
    head.arguments_at = first;
  } else {  // V3: function<sep>N\n```json\n{
    const size_t fence = body.find("```json", after);
    if (fence == std::string_view::npos) return head;
    head.name = std::string(TrimView(body.substr(after, fence - after)));
    const size_t open = body.find_first_not_of(" \n\r\t", fence + 7);
    if (open == std::string_view::npos) return head;
    if (body[open] != '{') return {Match::kMismatch, "", 0};
    head.arguments_at = open;
  }
  head.match = head.name.empty() ? Match::kMismatch : Match::kMatched;
  return head;
}

bool ToolCallParser::ParseCall(std::string_view body, ToolCallDelta& call) const {
  const std::string& sep = markers_.tool_sep;
  if (sep.empty()) {  // Qwen3: a JSON object with name and arguments.
    nlohmann::json j = nlohmann::json::parse(TrimView(body), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      return false;
    }
    call.name = j["name"].get<std::string>();
    const nlohmann::json args = j.value("arguments", nlohmann::json::object());
    call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
    return true;
  }
  const size_t pos = body.find(sep);
  if (pos == std::string_view::npos) return false;
  std::string_view left = TrimView(body.substr(0, pos));
  std::string_view right = body.substr(pos + sep.size());
  const size_t fence = right.find("```json");
  if (fence != std::string_view::npos) {  // V3: type<sep>name\n```json\nargs\n```
    call.name = std::string(TrimView(right.substr(0, fence)));
    std::string_view args = TrimView(right.substr(fence + 7));
    if (args.ends_with("```")) args.remove_suffix(3);
    call.arguments = NormaliseArguments(TrimView(args));
  } else {  // V4: name<sep>args
    call.name = std::string(left);
    call.arguments = NormaliseArguments(TrimView(right));
  }
  return !call.name.empty();
}

}  // namespace spark::engine::server
