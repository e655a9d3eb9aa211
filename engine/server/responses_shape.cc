// The response side of /v1/responses: the response object with its output items (reasoning,
// message, function_call) and the stream events that build it (response.created, ...,
// response.completed or response.incomplete), each with its sequence_number.
#include <ctime>
#include <random>

#include "engine/server/responses_api.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string RandomId(std::mt19937_64& rng, const char* prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = prefix;
  for (int i = 0; i < 32; ++i) out += kHex[rng() % 16];
  return out;
}

json Usage(const ChoiceEnd& end) {
  return {{"input_tokens", end.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", end.cached_tokens}}},
          {"output_tokens", end.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", end.prompt_tokens + end.completion_tokens}};
}

class ResponsesShape : public ResponseShape {
 public:
  ResponsesShape(std::string model, ordered_json echo)
      : model_(std::move(model)),
        echo_(std::move(echo)),
        created_(static_cast<int64_t>(std::time(nullptr))),
        rng_(std::random_device{}()) {
    id_ = RandomId(rng_, "resp_");
  }

  void StreamStart(ResponseWriter& w, int /*prompt_tokens*/) override {
    json r = Response("in_progress");
    Event(w, {{"type", "response.created"}, {"response", r}});
    Event(w, {{"type", "response.in_progress"}, {"response", r}});
  }

  void StreamDelta(ResponseWriter& w, const ParsedOutput& delta) override {
    if (!delta.reasoning.empty()) {
      Open(w, "reasoning");
      text_ += delta.reasoning;
      Event(w, {{"type", "response.reasoning_text.delta"},
                {"item_id", item_["id"]},
                {"output_index", Index()},
                {"content_index", 0},
                {"delta", delta.reasoning}});
    }
    if (!delta.content.empty()) {
      Open(w, "message");
      text_ += delta.content;
      Event(w, {{"type", "response.output_text.delta"},
                {"item_id", item_["id"]},
                {"output_index", Index()},
                {"content_index", 0},
                {"delta", delta.content},
                {"logprobs", json::array()}});
    }
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (call.begin) {
        Close(w, "completed");
        name_ = call.name;
        Open(w, "function_call");
      }
      if (!call.arguments.empty()) {
        text_ += call.arguments;
        Event(w, {{"type", "response.function_call_arguments.delta"},
                  {"item_id", item_["id"]},
                  {"output_index", Index()},
                  {"delta", call.arguments}});
      }
    }
  }

  void StreamEnd(ResponseWriter& w, const ChoiceEnd& end) override {
    const bool complete = end.finish_reason != "length";
    Close(w, complete ? "completed" : "incomplete");
    json r = Final(end);
    Event(w, {{"type", complete ? "response.completed" : "response.incomplete"}, {"response", r}});
  }

  HttpResponse Full(const ParsedOutput& total, const ChoiceEnd& end) override {
    const std::string status = end.finish_reason != "length" ? "completed" : "incomplete";
    if (!total.reasoning.empty()) Done(Item("reasoning", total.reasoning, status));
    if (!total.content.empty()) Done(Item("message", total.content, status));
    for (const ToolCallDelta& call : total.tool_calls) {
      name_ = call.name;
      Done(Item("function_call", call.arguments, status));
    }
    return {200, "application/json", {}, Dump(Final(end))};
  }

  HttpResponse Error(const ApiError& e) const override {
    return {e.http_status, "application/json", {}, e.ToJson()};
  }

  void StreamError(ResponseWriter& w, const ApiError& e) override {
    Event(w, {{"type", "error"},
              {"code", e.code.empty() ? json(e.type) : json(e.code)},
              {"message", e.message},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
  }

 private:
  json Response(const std::string& status) const {
    json r = {{"id", id_},
              {"object", "response"},
              {"created_at", created_},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"model", model_},
              {"output", output_},
              {"parallel_tool_calls", true},
              {"previous_response_id", nullptr},
              {"store", false},  // Nothing is stored, whatever the request said.
              {"truncation", "disabled"},
              {"usage", nullptr}};
    for (const auto& [key, value] : echo_.items()) r[key] = value;
    return r;
  }

  json Final(const ChoiceEnd& end) const {
    const bool complete = end.finish_reason != "length";
    json r = Response(complete ? "completed" : "incomplete");
    if (!complete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["usage"] = Usage(end);
    return r;
  }

  // An output item of `type` holding `text` (for a function call: its arguments).
  json Item(const std::string& type, const std::string& text, const std::string& status) {
    if (type == "reasoning") {
      return {{"id", RandomId(rng_, "rs_")},
              {"type", "reasoning"},
              {"summary", json::array()},
              {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})},
              {"status", status}};
    }
    if (type == "message") {
      return {{"id", RandomId(rng_, "msg_")},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", json::array({OutputText(text)})}};
    }
    return {{"id", RandomId(rng_, "fc_")},        {"type", "function_call"}, {"status", status},
            {"call_id", RandomId(rng_, "call_")}, {"name", name_},           {"arguments", text}};
  }

  static json OutputText(const std::string& text) {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", json::array()},
            {"logprobs", json::array()}};
  }

  void Done(json item) { output_.push_back(std::move(item)); }
  int Index() const { return static_cast<int>(output_.size()); }

  void Event(ResponseWriter& w, json data) {
    data["sequence_number"] = sequence_++;
    const std::string type = data["type"].get<std::string>();
    w.Write("event: " + type + "\ndata: " + Dump(data) + "\n\n");
  }

  // Starts an output item of `type` unless one is open (another type closes it first).
  void Open(ResponseWriter& w, const std::string& type) {
    if (open_ && type == type_ && type != "function_call") return;
    Close(w, "completed");
    item_ = Item(type, "", "in_progress");
    if (type == "reasoning") item_["content"] = json::array();
    if (type == "message") item_["content"] = json::array();
    type_ = type;
    open_ = true;
    text_.clear();
    Event(w, {{"type", "response.output_item.added"}, {"output_index", Index()}, {"item", item_}});
    if (type == "function_call") return;
    const json part =
        type == "message" ? OutputText("") : json{{"type", "reasoning_text"}, {"text", ""}};
    Event(w, {{"type", "response.content_part.added"},
              {"item_id", item_["id"]},
              {"output_index", Index()},
              {"content_index", 0},
              {"part", part}});
  }

  void Close(ResponseWriter& w, const std::string& status) {
    if (!open_) return;
    open_ = false;
    json item = item_;
    item["status"] = status;
    if (type_ == "function_call") {
      item["arguments"] = text_;
      Event(w, {{"type", "response.function_call_arguments.done"},
                {"item_id", item["id"]},
                {"output_index", Index()},
                {"name", item["name"]},
                {"arguments", text_}});
    } else {
      const bool message = type_ == "message";
      const json part =
          message ? OutputText(text_) : json{{"type", "reasoning_text"}, {"text", text_}};
      json done = {{"type", message ? "response.output_text.done" : "response.reasoning_text.done"},
                   {"item_id", item["id"]},
                   {"output_index", Index()},
                   {"content_index", 0},
                   {"text", text_}};
      if (message) done["logprobs"] = json::array();
      Event(w, std::move(done));
      Event(w, {{"type", "response.content_part.done"},
                {"item_id", item["id"]},
                {"output_index", Index()},
                {"content_index", 0},
                {"part", part}});
      item["content"] = json::array({part});
    }
    Event(w, {{"type", "response.output_item.done"}, {"output_index", Index()}, {"item", item}});
    Done(std::move(item));
  }

  const std::string model_;
  const ordered_json echo_;
  const int64_t created_;
  std::mt19937_64 rng_;
  std::string id_;
  json output_ = json::array();  // Finished items.
  int sequence_ = 0;
  bool open_ = false;
  std::string type_;
  json item_;         // The open item as announced.
  std::string text_;  // Its text (arguments for a function call) so far.
  std::string name_;  // The function of the call being opened.
};

}  // namespace

std::shared_ptr<ResponseShape> MakeResponsesShape(std::string model, ordered_json echo) {
  return std::make_shared<ResponsesShape>(std::move(model), std::move(echo));
}

}  // namespace spark::engine::server
