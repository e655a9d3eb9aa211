#include "tests/engine/server/http_test_client.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace spark::engine::server::testing {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

tcp::endpoint Local(int port) {
  return {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)};
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
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(socket, buffer, parser);
    const auto& res = parser.get();
    out.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    out.body = res.body();
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
