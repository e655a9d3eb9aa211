// The response side of /v1/messages: Anthropic's message object and its stream events
// (message_start, ping, content_block_start/delta/stop, message_delta, message_stop).
#include <random>

#include "engine/server/anthropic_messages.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string RandomId(std::mt19937_64& rng, const char* prefix) {
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string out = prefix;
  for (int i = 0; i < 24; ++i) out += kChars[rng() % 62];
  return out;
}

std::string StopReason(const ChoiceEnd& end) {
  if (end.finish_reason == "tool_calls") return "tool_use";
  if (end.finish_reason == "length") return "max_tokens";
  if (!end.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

// Anthropic counts cache reads apart from input_tokens.
json Usage(const ChoiceEnd& end) {
  return {{"input_tokens", end.prompt_tokens - end.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", end.cached_tokens},
          {"output_tokens", end.completion_tokens}};
}

json ToolInput(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : json::object();
}

class MessagesShape : public ResponseShape {
 public:
  explicit MessagesShape(std::string model)
      : model_(std::move(model)), rng_(std::random_device{}()) {
    id_ = RandomId(rng_, "msg_");
  }

  void StreamStart(ResponseWriter& w, int prompt_tokens) override {
    json message = Message(json::array());
    message["usage"] = {{"input_tokens", prompt_tokens},
                        {"cache_creation_input_tokens", 0},
                        {"cache_read_input_tokens", 0},
                        {"output_tokens", 0}};
    Event(w, "message_start", {{"type", "message_start"}, {"message", message}});
    Event(w, "ping", {{"type", "ping"}});
  }

  void StreamDelta(ResponseWriter& w, const ParsedOutput& delta) override {
    if (!delta.reasoning.empty()) {
      Open(w, "thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      BlockDelta(w, {{"type", "thinking_delta"}, {"thinking", delta.reasoning}});
    }
    if (!delta.content.empty()) {
      Open(w, "text", {{"type", "text"}, {"text", ""}});
      BlockDelta(w, {{"type", "text_delta"}, {"text", delta.content}});
    }
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (call.begin) {
        Close(w);
        Open(w, "tool_use",
             {{"type", "tool_use"},
              {"id", RandomId(rng_, "toolu_")},
              {"name", call.name},
              {"input", json::object()}});
      }
      if (!call.arguments.empty()) {
        BlockDelta(w, {{"type", "input_json_delta"}, {"partial_json", call.arguments}});
      }
    }
  }

  void StreamEnd(ResponseWriter& w, const ChoiceEnd& end) override {
    Close(w);
    Event(
        w, "message_delta",
        {{"type", "message_delta"},
         {"delta",
          {{"stop_reason", StopReason(end)},
           {"stop_sequence", end.stop_sequence.empty() ? json(nullptr) : json(end.stop_sequence)}}},
         {"usage", Usage(end)}});
    Event(w, "message_stop", {{"type", "message_stop"}});
  }

  HttpResponse Full(const ParsedOutput& total, const ChoiceEnd& end) override {
    json content = json::array();
    if (!total.reasoning.empty()) {
      content.push_back({{"type", "thinking"}, {"thinking", total.reasoning}, {"signature", ""}});
    }
    if (!total.content.empty()) content.push_back({{"type", "text"}, {"text", total.content}});
    for (const ToolCallDelta& call : total.tool_calls) {
      content.push_back({{"type", "tool_use"},
                         {"id", RandomId(rng_, "toolu_")},
                         {"name", call.name},
                         {"input", ToolInput(call.arguments)}});
    }
    json message = Message(std::move(content));
    message["stop_reason"] = StopReason(end);
    message["stop_sequence"] = end.stop_sequence.empty() ? json(nullptr) : json(end.stop_sequence);
    message["usage"] = Usage(end);
    return {200, "application/json", {}, Dump(message)};
  }

  HttpResponse Error(const ApiError& e) const override { return AnthropicErrorResponse(e); }

  void StreamError(ResponseWriter& w, const ApiError& e) override {
    Close(w);
    w.Write("event: error\ndata: " + AnthropicErrorJson(e) + "\n\n");
  }

 private:
  json Message(json content) const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", std::move(content)},
            {"stop_reason", nullptr},
            {"stop_sequence", nullptr}};
  }

  static void Event(ResponseWriter& w, const char* name, const json& data) {
    w.Write(std::string("event: ") + name + "\ndata: " + Dump(data) + "\n\n");
  }

  // Opens a block of `type` unless one is open already (a new block closes the previous one).
  void Open(ResponseWriter& w, const std::string& type, const json& block) {
    if (open_ && type == open_type_ && type != "tool_use") return;
    Close(w);
    Event(w, "content_block_start",
          {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
    open_ = true;
    open_type_ = type;
  }

  void BlockDelta(ResponseWriter& w, const json& delta) {
    Event(w, "content_block_delta",
          {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }

  void Close(ResponseWriter& w) {
    if (!open_) return;
    Event(w, "content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = false;
    ++index_;
  }

  const std::string model_;
  std::mt19937_64 rng_;
  std::string id_;
  bool open_ = false;
  std::string open_type_;
  int index_ = 0;
};

}  // namespace

std::shared_ptr<ResponseShape> MakeMessagesShape(std::string model) {
  return std::make_shared<MessagesShape>(std::move(model));
}

}  // namespace spark::engine::server
