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

}  // namespace

void ParsedOutput::Append(ParsedOutput other) {
  reasoning += other.reasoning;
  content += other.content;
  for (ParsedToolCall& c : other.tool_calls) tool_calls.push_back(std::move(c));
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
  if (strip_leading_) {
    const size_t n = buffer_.find_first_not_of(" \n\r\t");
    buffer_.erase(0, n == std::string::npos ? buffer_.size() : n);
    if (buffer_.empty()) return out;
    strip_leading_ = false;
  }
  if (state_ == State::kStart) {
    if (!begin_.empty() && buffer_.starts_with(begin_)) {
      buffer_.erase(0, begin_.size());
      state_ = State::kReasoning;
      strip_leading_ = true;
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
      strip_leading_ = true;
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
  const size_t end = buffer_.find(markers_.tool_call_end);
  if (end == std::string::npos) {
    if (!final) return false;
    EmitContent(out, markers_.tool_call_begin + std::exchange(buffer_, std::string()));
    return false;
  }
  ParsedToolCall call;
  if (ParseCall(std::string_view(buffer_).substr(0, end), call)) {
    pending_space_.clear();
    out.tool_calls.push_back(std::move(call));
    ++num_calls_;
  } else {
    EmitContent(out, markers_.tool_call_begin + buffer_.substr(0, end) + markers_.tool_call_end);
  }
  buffer_.erase(0, end + markers_.tool_call_end.size());
  state_ = in_section_ ? State::kSection : State::kContent;
  return true;
}

void ToolCallParser::EmitContent(ParsedOutput& out, std::string text) {
  if (text.empty()) return;
  if (num_calls_ > 0 && AllSpace(text)) {
    pending_space_ += text;
    return;
  }
  out.content += std::exchange(pending_space_, std::string()) + text;
}

bool ToolCallParser::ParseCall(std::string_view body, ParsedToolCall& call) const {
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
