// DeepSeek chat formats. deepseek_v3 reproduces the DeepSeek-V3 tokenizer_config.json template
// statement by statement, quirks included (its `is_first` flag is never reset, so only the very
// first tool-call turn opens <｜tool▁calls▁begin｜>). deepseek_v4 is our V4-style format, specified
// in docs/tokenizer.md and by tests/fixtures/chat/deepseek_v4.jinja.
#include <algorithm>

#include "engine/tokenizer/chat_formats_internal.h"
#include "engine/tokenizer/py_json.h"

namespace spark::tokenizer::internal {
namespace {

constexpr const char* kUser = "<｜User｜>";
constexpr const char* kAssistant = "<｜Assistant｜>";
constexpr const char* kEos = "<｜end▁of▁sentence｜>";
constexpr const char* kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr const char* kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr const char* kCallBegin = "<｜tool▁call▁begin｜>";
constexpr const char* kCallEnd = "<｜tool▁call▁end｜>";
constexpr const char* kSep = "<｜tool▁sep｜>";
constexpr const char* kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr const char* kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr const char* kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr const char* kOutputEnd = "<｜tool▁output▁end｜>";

ChatMarkers DeepSeekMarkers() {
  return ChatMarkers{{kEos}, "<think>", "</think>", kCallsBegin, kCallsEnd, kCallBegin, kCallEnd, kSep};
}

// System messages joined by blank lines, as both formats place them after the BOS token.
std::string SystemPrompt(const ChatRequest& request) {
  std::string prompt;
  bool first = true;
  for (const ChatMessage& m : request.messages) {
    if (m.role != "system") continue;
    if (!first) prompt += "\n\n";
    prompt += ContentOrEmpty(m);
    first = false;
  }
  return prompt;
}

class DeepSeekV3Format : public ChatFormat {
 public:
  explicit DeepSeekV3Format(std::string bos) : bos_(std::move(bos)), markers_(DeepSeekMarkers()) {}
  std::string_view name() const override { return "deepseek_v3"; }
  const ChatMarkers& markers() const override { return markers_; }

  // The reply starts a calls section with one call of type function, then the name and the
  // opening of its JSON fence when the name is given.
  ToolCallPrefill ForcedToolCall(const ChatRequest&, std::string_view function) const override {
    ToolCallPrefill p;
    p.markup = std::string(kCallsBegin) + kCallBegin + "function" + kSep;
    p.name_suffix = "\n```json\n";
    if (!function.empty()) p.markup += std::string(function) + p.name_suffix;
    p.arguments_suffix = "\n```";
    p.closing = std::string(kCallEnd) + kCallsEnd;
    return p;
  }

  Result<std::string> Render(const ChatRequest& request) const override {
    State s;
    std::string out = bos_ + SystemPrompt(request);
    for (const ChatMessage& m : request.messages) {
      if (m.role == "user") {
        s.is_tool = false;
        out += kUser + ContentOrEmpty(m);
      } else if (m.role == "assistant" && !m.content) {
        s.is_tool = false;
        for (const ToolCall& call : m.tool_calls) AppendToolCall(call, s, out);
      } else if (m.role == "assistant") {
        out += (s.is_tool ? kOutputsEnd : kAssistant) + *m.content + kEos;
        s.is_tool = false;
      } else if (m.role == "tool") {
        s.is_tool = true;
        out += s.is_output_first ? std::string(kOutputsBegin) + kOutputBegin
                                 : std::string("\n") + kOutputBegin;
        out += ContentOrEmpty(m) + kOutputEnd;
        s.is_output_first = false;
      }
    }
    if (s.is_tool) out += kOutputsEnd;
    if (request.add_generation_prompt && !s.is_tool) out += kAssistant;
    return out;
  }

 private:
  struct State {
    bool is_first = false;  // never reset, as in the template
    bool is_tool = false;
    bool is_output_first = true;
  };

  static void AppendToolCall(const ToolCall& call, State& s, std::string& out) {
    const std::string body = call.type + kSep + call.name + "\n```json\n" + ArgumentsText(call) +
                             "\n```" + kCallEnd;
    if (!s.is_first) {
      out += std::string(kAssistant) + kCallsBegin + kCallBegin + body;
      s.is_first = true;
    } else {
      out += std::string("\n") + kCallBegin + body + kCallsEnd + kEos;
    }
  }

  std::string bos_;
  ChatMarkers markers_;
};

class DeepSeekV4Format : public ChatFormat {
 public:
  explicit DeepSeekV4Format(std::string bos) : bos_(std::move(bos)), markers_(DeepSeekMarkers()) {}
  std::string_view name() const override { return "deepseek_v4"; }
  const ChatMarkers& markers() const override { return markers_; }

  // A generation prompt that opened the think block gets it closed; then a calls section with
  // one call, and the name and separator when the name is given.
  ToolCallPrefill ForcedToolCall(const ChatRequest& request,
                                 std::string_view function) const override {
    ToolCallPrefill p;
    if (KwargIs(request.template_kwargs, "thinking", true) ||
        KwargIs(request.template_kwargs, "enable_thinking", true)) {
      p.prompt_suffix = "</think>";
    }
    p.markup = std::string(kCallsBegin) + kCallBegin;
    p.name_suffix = kSep;
    if (!function.empty()) p.markup += std::string(function) + kSep;
    p.closing = std::string(kCallEnd) + kCallsEnd;
    return p;
  }

  Result<std::string> Render(const ChatRequest& request) const override {
    std::string out = bos_ + SystemPrompt(request);
    const bool has_system = std::any_of(request.messages.begin(), request.messages.end(),
                                        [](const ChatMessage& m) { return m.role == "system"; });
    if (!request.tools.empty()) out += ToolsSection(request.tools, has_system);
    const size_t last_user = LastUserIndex(request);
    for (size_t i = 0; i < request.messages.size(); ++i) {
      const ChatMessage& m = request.messages[i];
      if (m.role == "user") {
        out += kUser + ContentOrEmpty(m);
      } else if (m.role == "assistant") {
        AppendAssistant(m, i > last_user, out);
      } else if (m.role == "tool") {
        out += kOutputBegin + ContentOrEmpty(m) + kOutputEnd;
      }
    }
    if (request.add_generation_prompt) {
      const bool thinking = KwargIs(request.template_kwargs, "thinking", true) ||
                            KwargIs(request.template_kwargs, "enable_thinking", true);
      out += std::string(kAssistant) + (thinking ? "<think>" : "</think>");
    }
    return out;
  }

 private:
  static size_t LastUserIndex(const ChatRequest& request) {
    size_t last = 0;
    for (size_t i = 0; i < request.messages.size(); ++i) {
      if (request.messages[i].role == "user") last = i;
    }
    return last;
  }

  // Reasoning is kept only for turns after the last user message (the turn in progress).
  static void AppendAssistant(const ChatMessage& m, bool current_turn, std::string& out) {
    out += kAssistant;
    if (current_turn && m.reasoning_content && !m.reasoning_content->empty()) {
      out += "<think>" + *m.reasoning_content + "</think>";
    } else {
      out += "</think>";
    }
    out += ContentOrEmpty(m);
    if (!m.tool_calls.empty()) {
      out += kCallsBegin;
      for (const ToolCall& call : m.tool_calls) {
        out += kCallBegin + call.name + kSep + ArgumentsText(call) + kCallEnd;
      }
      out += kCallsEnd;
    }
    out += kEos;
  }

  static std::string ToolsSection(const nlohmann::ordered_json& tools, bool after_system) {
    std::string out = after_system ? "\n\n" : "";
    out += "## Tools\n\nYou have access to the following tools:\n";
    for (const auto& tool : tools) {
      const auto& f = tool.contains("function") ? tool["function"] : tool;
      out += "\n### " + f.value("name", "") + "\nDescription: " + f.value("description", "") +
             "\n\nParameters: " + PyJsonDumps(f.value("parameters", nlohmann::ordered_json::object())) +
             "\n";
    }
    out += std::string("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n") +
           kCallsBegin + kCallBegin + "tool_call_name" + kSep + "tool_call_arguments" + kCallEnd +
           "{{additional_tool_calls}}" + kCallsEnd +
           "\n\nWhere:\n- `tool_call_name` must be an exact match to one of the available tools\n"
           "- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
           "Parameters Schema\n- For multiple tool calls, chain them directly without "
           "separators or spaces\n";
    return out;
  }

  std::string bos_;
  ChatMarkers markers_;
};

}  // namespace

std::unique_ptr<ChatFormat> MakeDeepSeekV3Format(std::string bos_token) {
  return std::make_unique<DeepSeekV3Format>(std::move(bos_token));
}

std::unique_ptr<ChatFormat> MakeDeepSeekV4Format(std::string bos_token) {
  return std::make_unique<DeepSeekV4Format>(std::move(bos_token));
}

}  // namespace spark::tokenizer::internal
