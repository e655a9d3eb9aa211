#include "tests/engine/server/http_test_client.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <functional>
#include <memory>
#include <thread>

namespace spark::engine::server::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

tcp::endpoint Local(int port) {
  return {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)};
}

void Connect(tcp::socket& socket, int port, const Via& via) {
  if (!via.source.empty()) {
    socket.open(tcp::v4());
    socket.bind({net::ip::make_address(via.source), 0});
  }
  socket.connect(Local(port));
}

std::unique_ptr<ssl::context> ClientContext(const Via& via) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  ctx->add_certificate_authority(net::buffer(via.ca_pem));
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

template <typename Stream>
ClientResponse Call(Stream& stream, const std::string& method, const std::string& target,
                    const std::string& body, const std::map<std::string, std::string>& headers) {
  ClientResponse out;
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(stream, buffer, parser);
  const auto& res = parser.get();
  out.status = static_cast<int>(res.result_int());
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(f.value());
  }
  out.body = res.body();
  return out;
}

// Writes `raw`, then collects what arrives until the peer closes or `timeout` passes.
template <typename Stream>
std::string Exchange(net::io_context& ioc, Stream& stream, const std::string& raw,
                     std::chrono::milliseconds timeout) {
  std::string got;
  std::array<char, 4096> buf;
  std::function<void(boost::system::error_code, size_t)> on_read =
      [&](boost::system::error_code ec, size_t n) {
        if (ec) return;
        got.append(buf.data(), n);
        stream.async_read_some(net::buffer(buf), on_read);
      };
  net::async_write(stream, net::buffer(raw), [&](boost::system::error_code ec, size_t) {
    if (!ec) stream.async_read_some(net::buffer(buf), on_read);
  });
  ioc.run_for(timeout);
  return got;
}

}  // namespace

ClientResponse HttpCall(int port, const std::string& method, const std::string& target,
                        const std::string& body,
                        const std::map<std::string, std::string>& headers) {
  ClientResponse out;
  try {
    net::io_context ioc;
    tcp::socket socket(ioc);
    socket.connect(Local(port));
    out = Call(socket, method, target, body, headers);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

std::string RawExchange(int port, const std::string& raw, std::chrono::milliseconds timeout) {
  std::string got;
  try {
    net::io_context ioc;
    tcp::socket socket(ioc);
    socket.connect(Local(port));
    net::write(socket, net::buffer(raw));  // No half-close: partial requests must time out.
    std::array<char, 4096> buf;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    socket.non_blocking(true);
    while (std::chrono::steady_clock::now() < deadline) {
      boost::system::error_code ec;
      const size_t n = socket.read_some(net::buffer(buf), ec);
      if (ec == net::error::would_block) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (ec) break;
      got.append(buf.data(), n);
    }
  } catch (const std::exception&) {
  }
  return got;
}

bool StartAndDisconnect(int port, const std::string& target, const std::string& body,
                        size_t min_bytes) {
  try {
    net::io_context ioc;
    tcp::socket socket(ioc);
    socket.connect(Local(port));
    const std::string req = "POST " + target +
                            " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(socket, net::buffer(req));
    std::string got;
    std::array<char, 4096> buf;
    while (got.size() < min_bytes) got.append(buf.data(), socket.read_some(net::buffer(buf)));
    socket.set_option(net::socket_base::linger(true, 0));  // Reset, as a killed client would.
    socket.close();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

}  // namespace spark::engine::server::testing

namespace spark::engine::server::testing {

ClientResponse HttpCallVia(int port, const Via& via, const std::string& method,
                           const std::string& target, const std::string& body,
                           const std::map<std::string, std::string>& headers) {
  try {
    net::io_context ioc;
    tcp::socket socket(ioc);
    Connect(socket, port, via);
    if (via.ca_pem.empty()) return Call(socket, method, target, body, headers);
    auto ctx = ClientContext(via);
    beast::ssl_stream<tcp::socket> stream(std::move(socket), *ctx);
    stream.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    stream.handshake(ssl::stream_base::client);
    return Call(stream, method, target, body, headers);
  } catch (const std::exception& e) {
    ClientResponse out;
    out.error = e.what();
    return out;
  }
}

std::string RawExchangeVia(int port, const Via& via, const std::string& raw,
                           std::chrono::milliseconds timeout) {
  try {
    net::io_context ioc;
    tcp::socket socket(ioc);
    Connect(socket, port, via);
    if (via.ca_pem.empty()) return Exchange(ioc, socket, raw, timeout);
    auto ctx = ClientContext(via);
    beast::ssl_stream<tcp::socket> stream(std::move(socket), *ctx);
    stream.handshake(ssl::stream_base::client);
    return Exchange(ioc, stream, raw, timeout);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace spark::engine::server::testing
