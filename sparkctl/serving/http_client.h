// A small HTTP/1.1 client for the controller's serving commands (`sparkctl check`, `sparkctl
// bench serve`): one request per connection, http:// or https:// (TLS 1.2+, the server's
// certificate verified against --cacert or the system's CAs, and its name against the URL's
// host), the body delivered as it arrives so that server-sent events are timed when they land,
// not when the response ends.
// Thread-safety: free functions; concurrent calls are independent.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::serving {

struct Url {
  bool tls = false;  // https://
  std::string host;
  int port = 80;     // 443 for https:// without a port
  std::string ca_file;  // https: PEM CAs to trust ("" = the system's)
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string text;       // As given, for messages.
};

// "http[s]://host[:port][/prefix]". InvalidArgument naming the URL and what is wrong.
Result<Url> ParseUrl(std::string_view url);

struct HttpReply {
  int status = 0;
  std::string body;  // Empty when on_data consumed it.
};

struct HttpCallOptions {
  std::string method = "GET";
  std::string path;  // Appended to the URL's base path ("/v1/models").
  std::string body;  // JSON; sent with Content-Type: application/json when not empty.
  std::string api_key;  // Authorization: Bearer KEY when not empty.
  // The whole exchange, connection to the last byte.
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  // Receives the body in pieces as they arrive (then HttpReply::body stays empty).
  std::function<void(std::string_view)> on_data;
};

// Unavailable when the server cannot be reached, DeadlineExceeded past the timeout.
Result<HttpReply> HttpCall(const Url& url, const HttpCallOptions& options);

}  // namespace spark::serving
