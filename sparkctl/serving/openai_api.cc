#include "sparkctl/serving/openai_api.h"

#include "base/strings.h"

namespace spark::serving {
namespace {

using nlohmann::json;

double Between(StreamResult::Clock::time_point a, StreamResult::Clock::time_point b) {
  if (a == StreamResult::Clock::time_point() || b == StreamResult::Clock::time_point() || b < a) {
    return 0;
  }
  return std::chrono::duration<double>(b - a).count();
}

std::string ErrorMessage(const json& body, const std::string& raw) {
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    return body["error"].value("message", raw);
  }
  return std::string(Utf8Prefix(raw, 500));
}

// One `data:` payload of the stream.
void OnEvent(const std::string& data, StreamResult& r) {
  const auto now = StreamResult::Clock::now();
  if (data == "[DONE]") {
    r.saw_done = true;
    r.done = now;
    return;
  }
  const json j = json::parse(data, nullptr, false);
  if (!j.is_object()) return;
  if (j.contains("error")) {
    r.error = ErrorMessage(j, data);
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    Usage usage;
    usage.prompt_tokens = u.value("prompt_tokens", 0);
    usage.completion_tokens = u.value("completion_tokens", 0);
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
      usage.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0);
    }
    r.usage = usage;
  }
  if (!j.contains("choices") || !j["choices"].is_array()) return;
  for (const json& c : j["choices"]) {
    bool text = false;
    if (c.contains("text") && c["text"].is_string()) {  // /v1/completions
      r.content += c["text"].get<std::string>();
      text = !c["text"].get<std::string>().empty();
    }
    if (c.contains("delta") && c["delta"].is_object()) {
      const json& d = c["delta"];
      for (const char* key : {"reasoning_content", "reasoning"}) {
        if (d.contains(key) && d[key].is_string() && !d[key].get<std::string>().empty()) {
          if (std::string(key) == "reasoning_content" || !d.contains("reasoning_content")) {
            r.reasoning += d[key].get<std::string>();
          }
          text = true;
        }
      }
      if (d.contains("content") && d["content"].is_string()) {
        r.content += d["content"].get<std::string>();
        text = text || !d["content"].get<std::string>().empty();
      }
      if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
        for (const json& piece : d["tool_calls"]) {
          const size_t index = piece.value("index", 0);
          while (r.tool_calls.size() <= index) {
            r.tool_calls.push_back({{"id", ""}, {"name", ""}, {"arguments", ""}});
          }
          json& call = r.tool_calls[index];
          if (piece.contains("id") && piece["id"].is_string()) call["id"] = piece["id"];
          if (piece.contains("function") && piece["function"].is_object()) {
            const json& f = piece["function"];
            if (f.contains("name") && f["name"].is_string()) call["name"] = f["name"];
            if (f.contains("arguments") && f["arguments"].is_string()) {
              call["arguments"] =
                  call["arguments"].get<std::string>() + f["arguments"].get<std::string>();
            }
          }
          text = true;
        }
      }
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      r.finish_reason = c["finish_reason"];
    }
    if (text) {
      if (r.token_events++ == 0) r.first_token = now;
      r.last_token = now;
    }
  }
}

}  // namespace

double StreamResult::ttft_seconds() const { return Between(start, first_token); }
double StreamResult::decode_seconds() const { return Between(first_token, last_token); }
double StreamResult::total_seconds() const { return Between(start, done); }

Result<JsonReply> GetJson(const Endpoint& e, const std::string& path,
                          std::chrono::milliseconds timeout) {
  HttpCallOptions o;
  o.path = path;
  o.api_key = e.api_key;
  o.timeout = timeout;
  SPARK_ASSIGN_OR_RETURN(HttpReply r, HttpCall(e.url, o));
  return JsonReply{r.status, json::parse(r.body, nullptr, false), r.body};
}

Result<JsonReply> PostJson(const Endpoint& e, const std::string& path, const json& body,
                           std::chrono::milliseconds timeout) {
  HttpCallOptions o;
  o.method = "POST";
  o.path = path;
  o.body = body.dump();
  o.api_key = e.api_key;
  o.timeout = timeout;
  SPARK_ASSIGN_OR_RETURN(HttpReply r, HttpCall(e.url, o));
  JsonReply out{r.status, json::parse(r.body, nullptr, false), r.body};
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

Result<StreamResult> Stream(const Endpoint& e, const std::string& path, json body,
                            std::chrono::milliseconds timeout) {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (!body.contains("model")) body["model"] = e.model;
  StreamResult r;
  std::string pending;
  std::string error_body;
  int status = 0;
  HttpCallOptions o;
  o.method = "POST";
  o.path = path;
  o.body = body.dump();
  o.api_key = e.api_key;
  o.timeout = timeout;
  o.on_data = [&](std::string_view piece) {
    pending.append(piece);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      size_t at = 0;
      while (at < event.size()) {
        size_t nl = event.find('\n', at);
        if (nl == std::string::npos) nl = event.size();
        const std::string_view line(event.data() + at, nl - at);
        if (line.starts_with("data:")) {
          std::string_view data = line.substr(5);
          if (!data.empty() && data.front() == ' ') data.remove_prefix(1);
          OnEvent(std::string(data), r);
        }
        at = nl + 1;
      }
    }
    // Kept for a refusal's message, which is short: the first 4 KiB is plenty.
    if (error_body.size() < 4096) error_body.append(piece.substr(0, 4096 - error_body.size()));
  };
  r.start = StreamResult::Clock::now();
  SPARK_ASSIGN_OR_RETURN(HttpReply reply, HttpCall(e.url, o));
  status = reply.status;
  r.status = status;
  if (r.done == StreamResult::Clock::time_point()) r.done = StreamResult::Clock::now();
  if (status != 200) {
    const json j = json::parse(error_body, nullptr, false);
    r.error = ErrorMessage(j.is_discarded() ? json() : j, error_body);
  }
  return r;
}

Result<std::string> FirstModel(const Endpoint& e) {
  SPARK_ASSIGN_OR_RETURN(JsonReply r, GetJson(e, "/v1/models"));
  if (r.status != 200) {
    return UnavailableError(e.url.text + "/v1/models answered " + std::to_string(r.status) +
                            ": " + ErrorMessage(r.body, r.raw));
  }
  if (!r.body.is_object() || !r.body.contains("data") || !r.body["data"].is_array() ||
      r.body["data"].empty() || !r.body["data"][0].contains("id")) {
    return NotFoundError(e.url.text + "/v1/models lists no model");
  }
  return r.body["data"][0]["id"].get<std::string>();
}

}  // namespace spark::serving
