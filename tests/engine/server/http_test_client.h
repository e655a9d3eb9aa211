// A blocking HTTP/1.1 client for server tests (127.0.0.1 only): whole requests and responses
// (chunked bodies decoded), raw bytes for malformed-request tests, and SSE event splitting.
// Thread-safety: each call opens its own connection; safe from many threads.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>  // Before Boost: 1.74's asio uses std::exchange without including it.
#include <vector>

namespace spark::engine::server::testing {

struct ClientResponse {
  int status = 0;                              // 0: no response (connection failed or closed).
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;
  std::string error;
};

ClientResponse HttpCall(int port, const std::string& method, const std::string& target,
                        const std::string& body = "",
                        const std::map<std::string, std::string>& headers = {});

// Sends `raw` bytes and returns what came back before the server closed or `timeout`.
std::string RawExchange(int port, const std::string& raw, std::chrono::milliseconds timeout);

// How a client connects: from which local address, and over TLS or not.
struct Via {
  std::string source;  // Local address to bind, e.g. "127.0.0.2" ("" = the kernel's choice).
  std::string ca_pem;  // Non-empty: TLS, trusting only this PEM certificate for 127.0.0.1.
};

ClientResponse HttpCallVia(int port, const Via& via, const std::string& method,
                           const std::string& target, const std::string& body = "",
                           const std::map<std::string, std::string>& headers = {});
std::string RawExchangeVia(int port, const Via& via, const std::string& raw,
                           std::chrono::milliseconds timeout);

// Sends the start of a streaming request, reads `min_bytes` of the response, then closes.
bool StartAndDisconnect(int port, const std::string& target, const std::string& body,
                        size_t min_bytes);

// The `data: ...` payloads of an SSE body, in order.
std::vector<std::string> SseData(const std::string& body);

}  // namespace spark::engine::server::testing
