// OpenAIServer: the OpenAI-compatible HTTP API of spark-engine, shaped after vLLM's server so
// that existing clients and dashboards work unchanged.
//   POST /v1/chat/completions, POST /v1/completions   (streaming and not; completion_job.h)
//   GET  /v1/models, GET /v1/models/{id}
//   POST /tokenize, POST /detokenize   (vLLM's shapes)
//   POST /v1/messages, POST /v1/messages/count_tokens   (Anthropic's; anthropic_messages.h)
//   POST /v1/responses   (OpenAI's Responses API, stateless; responses_api.h)
//   GET  /version
//   GET  /health    the process is alive (no model work)
//   GET  /ready     a real one-token generation through the service (so through every rank),
//                   cached for a few seconds; 503 naming the error when it fails or hangs, or
//                   while the memory guard holds admission; 200 with "busy": true when the
//                   canary waits behind work that is progressing (a long prefill is not a hang)
//   GET  /metrics   Prometheus text, vLLM names (metrics.h)
// Safety: /v1/* needs a Bearer key when keys are configured, and keys are required when the
// server binds a non-loopback address; failed keys are rate-limited per client address; TLS and
// per-address connection limits live in HttpServer; a bounded number of sequences in flight (429 with
// Retry-After beyond it); Drain() for SIGTERM. docs/server.md lists every parameter and limit.
// Thread-safety: Start/Drain/Stop from one controlling thread; requests run on I/O threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/server/api_keys.h"
#include "engine/server/auth_failures.h"
#include "engine/server/completion_job.h"
#include "engine/server/http_server.h"
#include "engine/server/metrics.h"
#include "engine/server/text_codec.h"

namespace spark::engine::server {

struct OpenAIServerOptions {
  HttpServerOptions http;
  std::string served_model_name = "model";
  ApiKeys api_keys;  // Empty: no auth (allowed on loopback addresses only).
  // Failed key attempts per client address before 429 (auth_failures.h).
  AuthFailureOptions auth_failures;
  // Sequences submitted and not finished, at most; more: 429. Default 256.
  int max_pending_sequences = 256;
  int retry_after_seconds = 1;
  // /ready: how long a canary result is reused, and how long a canary may take.
  std::chrono::milliseconds ready_cache{3000};
  std::chrono::milliseconds ready_timeout{10'000};
  // A canary queued behind running work answers "busy" (200) after this long while the engine's
  // step and prefill counters advance; it fails only once they stand still for ready_timeout.
  std::chrono::milliseconds ready_busy_after{1000};
  // A step may run this long before a canary waiting on it counts as stalled (one long prefill
  // chunk is busy, not hung; sparkctl's monitor uses the same figure). Default: 120 s.
  std::chrono::milliseconds ready_step_timeout{120'000};
  // max_tokens for a request that gives none; 0: chat gets the rest of the context, completions
  // 16 (OpenAI's defaults). Never more than the context leaves.
  int default_max_tokens = 0;
  // The most max_tokens a request may ask for; 0: the context length. A request above it is a
  // 400 naming both numbers.
  int max_tokens_limit = 0;
  // Threads that compile grammars (structured output). Default 4.
  int grammar_threads = 4;
};

// The structured-output compiler over `codec`'s vocabulary cut to the model's `vocab_size`.
// Serve makes it before loading the weights: its tables (a few MiB for a 150K vocabulary) belong
// to the engine process, not to the weights or the cache the memory plan measures.
Result<std::unique_ptr<grammar::GrammarCompiler>> MakeGrammarCompiler(const TextCodec& codec,
                                                                      int vocab_size,
                                                                      int threads);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackAddress(const std::string& host);

class OpenAIServer {
 public:
  // FailedPrecondition when binding a non-loopback address without API keys; the errors of
  // HttpServer::Start. `service` and `codec` must outlive the server. `grammar` is the
  // structured-output compiler made by MakeGrammarCompiler; null makes one here.
  static Result<std::unique_ptr<OpenAIServer>> Start(
      const OpenAIServerOptions& options, GenerationService* service, const TextCodec* codec,
      std::unique_ptr<grammar::GrammarCompiler> grammar = nullptr);
  ~OpenAIServer();

  int port() const { return http_->port(); }
  HttpServer& http() { return *http_; }
  int active_sequences() const { return context_->active_sequences; }
  // Stops accepting connections, answers new requests with 503 and waits for running requests
  // to finish. DeadlineExceeded when some were still running after `timeout`.
  Status Drain(std::chrono::milliseconds timeout);
  void Stop();

 private:
  OpenAIServer(const OpenAIServerOptions& options, GenerationService* service,
               const TextCodec* codec);

  void Handle(HttpRequest request, std::shared_ptr<ResponseWriter> writer);
  void HandleCompletion(Endpoint endpoint, const HttpRequest& request,
                        std::shared_ptr<ResponseWriter> writer);
  // Admission (at most max_pending_sequences) and the job that answers.
  void Run(PreparedRequest prepared, std::shared_ptr<ResponseWriter> writer);
  // /v1/messages and /v1/messages/count_tokens; /v1/responses (client_api_routes.cc).
  void HandleMessages(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer,
                      bool count_tokens);
  void HandleResponses(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
  std::optional<ApiError> Prepare(CompletionRequest request, PreparedRequest* out) const;
  std::optional<ApiError> PrepareChat(CompletionRequest& request, PreparedRequest* out) const;
  std::optional<ApiError> SetMaxTokens(PreparedRequest* p) const;
  // Structured output and forced tool calls -> params.constraint (grammar_compiler.h).
  std::optional<ApiError> SetConstraint(PreparedRequest* p) const;
  void HandleModels(const std::string& id, std::shared_ptr<ResponseWriter> writer) const;
  void HandleTokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) const;
  void HandleDetokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) const;
  void HandleReady(std::shared_ptr<ResponseWriter> writer);
  void StartCanary();
  void FinishCanary(uint64_t id, Status result);
  struct CanaryGuard {  // Lets a late canary event find out that the server is gone.
    std::mutex mu;
    OpenAIServer* server = nullptr;
  };
  void WatchCanary();
  // Tells the waiters "busy" (ready_mu_ held on entry, released on return).
  void AnswerBusy(std::unique_lock<std::mutex>& lock);

  const OpenAIServerOptions options_;
  std::shared_ptr<ServerMetrics> metrics_;
  std::shared_ptr<ServerContext> context_;
  std::shared_ptr<CanaryGuard> canary_guard_;
  std::unique_ptr<AuthFailures> auth_failures_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> draining_{false};

  // /ready canary state.
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  bool canary_running_ = false;
  uint64_t canary_id_ = 0;
  std::chrono::steady_clock::time_point canary_deadline_;
  std::optional<Status> canary_result_;
  std::chrono::steady_clock::time_point canary_started_;
  bool canary_busy_ = false;       // waiters were told "busy": the engine progresses
  uint64_t progress_mark_ = 0;     // engine steps + prefilled tokens when they last moved
  std::chrono::steady_clock::time_point progress_at_;
  std::chrono::steady_clock::time_point canary_time_;
  std::vector<std::shared_ptr<ResponseWriter>> ready_waiters_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace spark::engine::server
