// The dashboard's HTTP side, on the engine's HttpServer (engine/server/http_server.h: Beast, size
// limits, TLS, per-peer limits): GET / (the page), /assets/<file> (embedded), /events (SSE:
// "hello" with the hour of history, then one "tick" per collector tick), /api/snapshot,
// /api/history, /api/events and /metrics (cluster-wide Prometheus text, cluster_metrics.h).
// Bound off loopback it requires an API key on every request: "Authorization: Bearer KEY", or
// the cookie that opening /?key=KEY sets (a browser's EventSource cannot send headers); with TLS
// files it serves HTTPS only.
// Thread-safety: Start/Stop from one thread; requests are answered on the server's threads.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "base/status.h"
#include "engine/server/api_keys.h"
#include "engine/server/http_server.h"
#include "sparkctl/dashboard/history.h"

namespace spark::dashboard {

struct DashboardOptions {
  std::string bind = "127.0.0.1";
  int port = 8090;  // 0: any free port
  // Keys accepted; required (non-empty) when `bind` is not a loopback address.
  engine::server::ApiKeys keys;
  engine::server::TlsFiles tls;  // empty: plain HTTP
};

// True for 127.0.0.0/8 and ::1.
bool IsLoopbackAddress(const std::string& address);

class DashboardServer {
 public:
  // InvalidArgument when bound off loopback without keys; the errors of HttpServer::Start.
  static Result<std::unique_ptr<DashboardServer>> Start(const DashboardOptions& options,
                                                        History& history);
  ~DashboardServer();
  int port() const { return server_->port(); }
  void Stop();

  // Answers one request (the server's handler; tests call it directly).
  void Handle(engine::server::HttpRequest request,
              std::shared_ptr<engine::server::ResponseWriter> writer);

 private:
  DashboardServer(const DashboardOptions& options, History& history);
  bool Authorized(const engine::server::HttpRequest& request) const;

  const DashboardOptions options_;
  History& history_;
  std::unique_ptr<engine::server::HttpServer> server_;
  std::mutex mu_;
  std::set<int> listeners_;  // History listener ids of open event streams
};

}  // namespace spark::dashboard
