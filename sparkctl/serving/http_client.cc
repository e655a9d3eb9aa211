#include "sparkctl/serving/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <openssl/ssl.h>

#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>

#include "base/strings.h"

namespace spark::serving {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

}  // namespace

Result<Url> ParseUrl(std::string_view text) {
  Url u;
  u.text = std::string(text);
  std::string_view rest = text;
  if (rest.starts_with("https://")) {
    u.tls = true;
    u.port = 443;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return InvalidArgumentError("--url " + u.text +
                                ": expected http[s]://HOST[:PORT][/PREFIX]");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  u.base_path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  if (u.base_path.ends_with("/v1")) u.base_path.resize(u.base_path.size() - 3);  // OpenAI style
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    const std::optional<int64_t> port = ParseInt(authority.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535) {
      return InvalidArgumentError("--url " + u.text + ": the port must be 1..65535");
    }
    u.port = static_cast<int>(*port);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return InvalidArgumentError("--url " + u.text + ": no host");
  u.host = std::string(authority);
  return u;
}

// The exchange over a connected stream (plain or TLS).
template <typename Stream>
Result<HttpReply> Exchange(Stream& stream, const Url& url, const HttpCallOptions& o) {
  HttpReply reply;
  beast::error_code ec;
  http::request<http::string_body> req{http::string_to_verb(o.method), url.base_path + o.path,
                                       11};
  req.set(http::field::host, url.host);
  req.set(http::field::user_agent, "sparkctl");
  if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
  if (!o.body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = o.body;
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec) return UnavailableError(url.text + ": sending the request: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // No limit (Boost 1.74 compares a Content-Length against an empty optional as "exceeded",
  // so the largest value, not boost::none).
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(stream, buffer, parser, ec);
  if (ec == beast::error::timeout) return DeadlineExceededError(url.text + o.path + ": timed out");
  if (ec) return UnavailableError(url.text + o.path + ": reading the reply: " + ec.message());
  reply.status = static_cast<int>(parser.get().result_int());
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec == beast::error::timeout) {
      return DeadlineExceededError(url.text + o.path + ": timed out after " +
                                   std::to_string(o.timeout.count()) + " ms");
    }
    if (ec) return UnavailableError(url.text + o.path + ": reading the reply: " + ec.message());
    const size_t n = sizeof chunk - parser.get().body().size;
    if (n == 0) continue;
    if (o.on_data) {
      o.on_data(std::string_view(chunk, n));
    } else {
      reply.body.append(chunk, n);
    }
  }
  return reply;
}

Result<HttpReply> HttpCall(const Url& url, const HttpCallOptions& o) {
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(o.timeout);
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
    if (ec) return UnavailableError(url.text + ": cannot resolve " + url.host + ": " + ec.message());
    stream.connect(endpoints, ec);
    if (ec) {
      return UnavailableError(url.text + ": cannot connect to " + url.host + ":" +
                              std::to_string(url.port) + ": " + ec.message());
    }
    if (!url.tls) {
      Result<HttpReply> reply = Exchange(stream, url, o);
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      return reply;
    }
    ssl::context ctx(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    if (url.ca_file.empty()) {
      ctx.set_default_verify_paths();
    } else {
      ctx.load_verify_file(url.ca_file, ec);
      if (ec) return InvalidArgumentError("--cacert " + url.ca_file + ": " + ec.message());
    }
    ctx.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> tls(std::move(stream), ctx);
    SSL_set_tlsext_host_name(tls.native_handle(), url.host.c_str());
    tls.set_verify_callback(ssl::host_name_verification(url.host));
    tls.handshake(ssl::stream_base::client, ec);
    if (ec) {
      return UnavailableError(url.text + ": TLS handshake: " + ec.message() +
                              (url.ca_file.empty() ? " (give --cacert with the server's CA)" : ""));
    }
    Result<HttpReply> reply = Exchange(tls, url, o);
    tls.shutdown(ec);  // A close_notify; the server may just close.
    return reply;
  } catch (const std::exception& e) {
    return UnavailableError(url.text + o.path + ": " + e.what());
  }
}

}  // namespace spark::serving
