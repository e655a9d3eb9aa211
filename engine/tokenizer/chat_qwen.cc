// Qwen3 ChatML format: the Qwen3 tokenizer_config.json template, statement by statement
// (tools in <tools>, calls in <tool_call>, results in <tool_response>, reasoning kept only for
// the turns after the last real user query, `enable_thinking` false -> empty think block).
#include "engine/tokenizer/chat_formats_internal.h"
#include "engine/tokenizer/py_json.h"

namespace spark::tokenizer::internal {
namespace {

// Python's str.lstrip / rstrip / strip with a set of characters.
std::string LStrip(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? "" : std::string(s.substr(b));
}
std::string RStrip(std::string_view s, std::string_view chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? "" : std::string(s.substr(0, e + 1));
}
std::string Strip(std::string_view s, std::string_view chars) { return LStrip(RStrip(s, chars), chars); }

bool IsToolResponseWrapped(const std::string& content) {
  constexpr std::string_view kOpen = "<tool_response>", kClose = "</tool_response>";
  return content.starts_with(kOpen) && content.ends_with(kClose);
}

class Qwen3Format : public ChatFormat {
 public:
  Qwen3Format() {
    markers_ = ChatMarkers{{"<|im_end|>", "<|endoftext|>"}, "<think>", "</think>", "", "",
                           "<tool_call>", "</tool_call>", ""};
  }
  std::string_view name() const override { return "qwen3"; }
  const ChatMarkers& markers() const override { return markers_; }

  // The reply starts `<tool_call>\n{"name": "` (then the name and `", "arguments": ` when it
  // is given), after the empty think block the template writes when thinking is off.
  ToolCallPrefill ForcedToolCall(const ChatRequest& request,
                                 std::string_view function) const override {
    ToolCallPrefill p;
    if (!KwargIs(request.template_kwargs, "enable_thinking", false)) {
      p.prompt_suffix = "<think>\n\n</think>\n\n";
    }
    p.markup = "<tool_call>\n{\"name\": \"";
    p.name_suffix = "\", \"arguments\": ";
    if (!function.empty()) p.markup += std::string(function) + p.name_suffix;
    p.arguments_suffix = "}";
    p.closing = "\n</tool_call>";
    return p;
  }

  Result<std::string> Render(const ChatRequest& request) const override {
    const auto& msgs = request.messages;
    std::string out = SystemBlock(request);
    const size_t last_query = LastQueryIndex(msgs);
    for (size_t i = 0; i < msgs.size(); ++i) {
      const ChatMessage& m = msgs[i];
      if (m.role == "user" || (m.role == "system" && i != 0)) {
        out += "<|im_start|>" + m.role + "\n" + ContentOrEmpty(m) + "<|im_end|>\n";
      } else if (m.role == "assistant") {
        AppendAssistant(m, i > last_query, i + 1 == msgs.size(), out);
      } else if (m.role == "tool") {
        if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
        out += "\n<tool_response>\n" + ContentOrEmpty(m) + "\n</tool_response>";
        if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
      }
    }
    if (request.add_generation_prompt) {
      out += "<|im_start|>assistant\n";
      if (KwargIs(request.template_kwargs, "enable_thinking", false)) out += "<think>\n\n</think>\n\n";
    }
    return out;
  }

 private:
  static std::string SystemBlock(const ChatRequest& request) {
    const auto& msgs = request.messages;
    const bool has_system = !msgs.empty() && msgs[0].role == "system";
    if (request.tools.empty()) {
      return has_system ? "<|im_start|>system\n" + ContentOrEmpty(msgs[0]) + "<|im_end|>\n" : "";
    }
    std::string out = "<|im_start|>system\n";
    if (has_system) out += ContentOrEmpty(msgs[0]) + "\n\n";
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& tool : request.tools) out += "\n" + PyJsonDumps(tool);
    out += "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
           "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
    return out;
  }

  // The last user message that is not a wrapped tool response (the template's
  // ns.last_query_index); the last index when there is none.
  static size_t LastQueryIndex(const std::vector<ChatMessage>& msgs) {
    for (size_t i = msgs.size(); i-- > 0;) {
      if (msgs[i].role == "user" && !IsToolResponseWrapped(ContentOrEmpty(msgs[i]))) return i;
    }
    return msgs.empty() ? 0 : msgs.size() - 1;
  }

  static void AppendAssistant(const ChatMessage& m, bool after_query, bool last, std::string& out) {
    std::string content = ContentOrEmpty(m);
    std::string reasoning;
    if (m.reasoning_content) {
      reasoning = *m.reasoning_content;
    } else if (const size_t end = content.find("</think>"); end != std::string::npos) {
      // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
      const std::string before = RStrip(std::string_view(content).substr(0, end), "\n");
      const size_t open = before.rfind("<think>");
      reasoning = LStrip(open == std::string::npos ? before : before.substr(open + 7), "\n");
      // content.split('</think>')[-1].lstrip('\n')
      content = LStrip(std::string_view(content).substr(content.rfind("</think>") + 8), "\n");
    }
    if (after_query && (last || !reasoning.empty())) {
      out += "<|im_start|>assistant\n<think>\n" + Strip(reasoning, "\n") + "\n</think>\n\n" +
             LStrip(content, "\n");
    } else {
      out += "<|im_start|>assistant\n" + content;
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      if (j > 0 || !content.empty()) out += "\n";
      out += "<tool_call>\n{\"name\": \"" + m.tool_calls[j].name + "\", \"arguments\": " +
             ArgumentsText(m.tool_calls[j]) + "}\n</tool_call>";
    }
    out += "<|im_end|>\n";
  }

  ChatMarkers markers_;
};

}  // namespace

std::unique_ptr<ChatFormat> MakeQwen3Format() { return std::make_unique<Qwen3Format>(); }

}  // namespace spark::tokenizer::internal
