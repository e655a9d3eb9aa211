// HttpServer: a small HTTP/1.1 server on Boost.Beast for the OpenAI endpoint. It reads one
// request at a time per connection (keep-alive), enforces size limits (431 for headers, 413 for
// bodies) and a deadline for receiving a whole request (slowloris), and hands each request to
// one Handler with a ResponseWriter. The writer sends a whole response or a chunked stream
// (server-sent events), and reports a client that goes away mid-response (so generation can be
// cancelled). All Beast/Asio exceptions and error codes stay inside this module.
// With TLS files it serves HTTPS only (tls_context.h); a plain HTTP request to it gets a plain
// 400 saying so. Connections and requests are bounded per peer address (peer_table.h), and
// /health and /metrics from loopback are answered even past those bounds.
// Thread-safety: Start/StopAccepting/Stop from one controlling thread; ResponseWriter methods
// from any thread. Handlers run on the server's I/O threads and must not block.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/server/peer_table.h"
#include "engine/server/tls_context.h"

namespace spark::engine::server {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // "/v1/models" (query string included)
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;
  std::string peer;            // The client's IP address ("127.0.0.1", "::1").
  bool peer_loopback = false;  // The client is on this machine.

  // The header's value, or "" when absent. `name` in lower case.
  std::string Header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A whole response. Later calls are ignored.
  virtual void Send(HttpResponse response) = 0;
  // Starts a chunked response (e.g. text/event-stream); then Write pieces, then EndStream.
  virtual void StartStream(int status, std::string content_type) = 0;
  virtual void Write(std::string data) = 0;
  virtual void EndStream() = 0;
  // `on_gone` runs once (on an I/O thread) if the client disconnects before the response
  // ends. Call before the response can end; set at most once.
  virtual void OnClientGone(std::function<void()> on_gone) = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<ResponseWriter>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port (see HttpServer::port()).
  int io_threads = 2;
  size_t max_header_bytes = 16 * 1024;      // Larger: 431.
  size_t max_body_bytes = 8 * 1024 * 1024;  // Larger: 413.
  // A request (headers and body) must arrive within this time; idle keep-alive connections
  // are closed after it too.
  std::chrono::milliseconds request_timeout{10'000};
  // Connections in all and per peer address, requests in flight per peer (peer_table.h).
  PeerLimits limits;
  // Retry-After (seconds) on the 429/503 answers to connections and requests over the limits.
  int retry_after_seconds = 1;
  // Paths answered to loopback clients even past the limits (the monitor's probes).
  std::vector<std::string> loopback_exempt_paths = {"/health", "/metrics"};
  TlsFiles tls;  // Empty: plain HTTP.
};

class HttpServer {
 public:
  // Binds and starts the I/O threads. InvalidArgument for a bad address, Unavailable when the
  // port cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   HttpHandler handler);
  ~HttpServer();  // Stops.

  int port() const;
  int num_connections() const;  // Open, refused ones included.
  int num_peers() const;        // Addresses with connections open.
  // Requests read whose response has not been fully written yet.
  int num_active_requests() const;
  // Re-reads the TLS files for new connections; live ones keep theirs. The errors of
  // MakeServerTlsContext (the old files stay in use); FailedPrecondition without TLS.
  Status ReloadTls();
  // Closes the listening socket; open connections continue.
  void StopAccepting();
  // Closes everything and joins the I/O threads.
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace spark::engine::server
