// CompletionJob: one /v1/chat/completions or /v1/completions request in flight. It submits the
// request's n sequences to the GenerationService, turns each token event into text (streaming
// detokenizer, stop strings, reasoning and tool-call parsers), and writes OpenAI's response: a
// stream of SSE chunks ending in `data: [DONE]`, or one JSON object at the end. A client that
// goes away cancels the sequences, which frees their KV blocks.
// Thread-safety: events arrive on a delivery thread (event_delivery.h: in order for one request,
// off the engine's step loop) and cancellation on an I/O thread; one internal mutex orders them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/grammar_compiler.h"
#include "engine/server/generation_service.h"
#include "engine/server/http_server.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_request.h"
#include "engine/server/output_parser.h"
#include "engine/server/response_shape.h"
#include "engine/server/text_codec.h"

namespace spark::engine::server {

// What jobs share with the server; jobs hold it, so it outlives a server stopped while the
// service still delivers events.
struct ServerContext {
  GenerationService* service = nullptr;
  const TextCodec* codec = nullptr;
  std::shared_ptr<ServerMetrics> metrics;
  std::string model_name;
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> active_sequences{0};  // Submitted and not finished (backpressure, drain).
  // Structured output: grammars over the codec's vocabulary.
  std::unique_ptr<grammar::GrammarCompiler> grammar;
};

// A request checked and tokenized, ready to run.
struct PreparedRequest {
  CompletionRequest request;
  std::vector<int32_t> prompt;
  // Completions: every prompt of the request (prompt is the first), and with echo, the text each
  // choice starts with (the prompt's text, or the decoded ids).
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo_texts;
  bool starts_in_reasoning = false;  // The prompt ends inside an open think block.
  bool prompt_closed_think = false;  // The prompt ends with a closed (empty) think block.
  bool parse_tools = false;
  // tool_choice "required" or a named function: the prompt ends with `tool_markup` (the start
  // of a call, fed to the tool parser before the model's text), and each choice must end with
  // valid calls of `tool_names` (the named function first) or the request fails.
  bool tool_required = false;
  std::string tool_markup;
  std::vector<std::string> tool_names;
  // A forced call written under a grammar: the markup that closes it, handed to the tool
  // parser when the choice stops (the grammar ends at the arguments).
  std::string tool_closing;
  tokenizer::ToolCallPrefill tool_prefill;
  // Another API's response shape (/v1/messages, /v1/responses); null: OpenAI's chat or
  // completions shape. Set only with n = 1.
  std::shared_ptr<ResponseShape> shape;
};

class CompletionJob : public std::enable_shared_from_this<CompletionJob> {
 public:
  CompletionJob(std::shared_ptr<ServerContext> context, PreparedRequest prepared,
                std::shared_ptr<ResponseWriter> writer);
  // Submits the sequences; the response follows asynchronously.
  void Start();
  // Client gone: cancels every unfinished sequence.
  void Cancel();

 private:
  struct Choice {
    uint64_t seq_id = 0;
    size_t prompt_index = 0;  // which prompt of a batch
    bool prompt_seen = false;  // the first event (with the prompt's scores) arrived
    std::string echo;          // the prompt's text, sent before the first generated text
    size_t text_offset = 0;    // completions logprobs: bytes of text before the next entry
    nlohmann::json prompt_logprobs;  // vLLM's prompt_logprobs list (null: not asked)
    std::unique_ptr<TokenStream> stream;
    std::string raw;     // Detokenized output (stop strings applied).
    size_t checked = 0;  // Bytes of raw searched for stop strings.
    size_t emitted = 0;  // Bytes of raw passed to the parsers.
    std::unique_ptr<ReasoningParser> reasoning;
    std::unique_ptr<ToolCallParser> tools;
    ParsedOutput total;    // Non-streaming: everything parsed.
    ParsedOutput prefill;  // What the tool parser made of tool_markup, sent with the first text.
    int num_tokens = 0;
    int num_tool_calls = 0;
    bool finished = false;      // The response for this choice is complete.
    bool service_done = false;  // The service sent its final event (KV freed).
    std::string finish_reason;
    std::string stop_sequence;  // The stop string that ended the choice.
    nlohmann::json logprobs = nlohmann::json::array();  // Entries not yet sent.
    std::chrono::steady_clock::time_point last_token_time;
  };

  void OnEvent(size_t index, const GenerationEvent& event);
  // The text `event` adds to the choice (after stop strings), and whether a stop string ended it.
  std::string NewText(Choice& c, const GenerationEvent& event, bool* stop_matched);
  ParsedOutput Parse(Choice& c, const std::string& text, bool final);
  void AddLogprobs(Choice& c, const GenerationEvent& event);
  // The first event of a choice: its prompt's scores as echo entries and as prompt_logprobs.
  // Internal when the engine's scores do not cover the prompt.
  Status AddPrompt(Choice& c, const GenerationEvent& event);
  // A token as logprobs show it: its text, or "token_id:<id>" (return_tokens_as_token_ids).
  std::string TokenLabel(int32_t id) const;
  nlohmann::json CompletionLogprobs(Choice& c) const;
  void FinishChoice(Choice& c, const std::string& reason);
  // InvalidArgument when a forced call (tool_choice required / named) did not come out valid.
  Status CheckForcedCalls(const Choice& c) const;
  void StreamDelta(size_t index, Choice& c, const ParsedOutput& delta);
  void StreamFinish(size_t index, Choice& c);
  void Fail(const Status& error);
  void Complete();
  FinishedRequest Finished(const std::string& reason) const;  // For the metrics.
  void SendFullResponse();
  ChoiceEnd End(const Choice& c) const;
  nlohmann::json ChunkBase() const;
  nlohmann::json Usage() const;
  int PromptTokens() const;  // of every prompt of the request
  nlohmann::json ToolCallsJson(const std::vector<ToolCallDelta>& calls);
  std::string ToolCallId();
  void WriteEvent(const nlohmann::json& j);
  void WriteChunk(size_t index, Choice& c, nlohmann::json delta);

  const std::shared_ptr<ServerContext> context_;
  const PreparedRequest prepared_;
  const std::shared_ptr<ResponseWriter> writer_;
  std::string id_;
  const int64_t created_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::vector<Choice> choices_;
  int num_finished_ = 0;
  int cached_tokens_ = 0;
  bool first_token_seen_ = false;
  bool failed_ = false;
  bool cancelled_ = false;
  std::mt19937_64 rng_;
};

}  // namespace spark::engine::server
