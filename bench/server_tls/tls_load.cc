// Load for bench/server_tls: C client threads against a running `spark-engine serve`, in clear
// text or over TLS (--cacert), for --seconds. Two workloads:
//   requests  non-streaming chat completions of one token (request rate; --reuse keeps one
//             keep-alive connection per client, otherwise every request opens a connection
//             and, over TLS, pays a full handshake)
//   stream    streaming chat completions of --tokens tokens each (SSE token rate)
// Prints one JSON object: requests, tokens, errors, seconds, and the rates.
#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Options {
  int port = 8000;
  std::string cacert;  // "" = clear text
  std::string workload = "requests";
  int concurrency = 8;
  double seconds = 10;
  int tokens = 64;
  bool reuse = false;
  std::string api_key;
  std::string model = "demo";
};

struct Totals {
  std::atomic<long> requests{0}, tokens{0}, errors{0};
};

// One client's connection: plain or TLS, reopened after an error or when not reused.
class Connection {
 public:
  Connection(net::io_context& ioc, const Options& o, ssl::context* ctx)
      : ioc_(ioc), o_(o), ctx_(ctx) {}

  // Sends `body` and returns the response body ("" on error).
  std::optional<std::string> Post(const std::string& body) {
    try {
      if (!open_) Open();
      http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
      req.set(http::field::host, "127.0.0.1");
      req.set(http::field::content_type, "application/json");
      if (!o_.api_key.empty()) req.set(http::field::authorization, "Bearer " + o_.api_key);
      req.keep_alive(o_.reuse);
      req.body() = body;
      req.prepare_payload();
      http::response<http::string_body> res;
      beast::flat_buffer buffer;
      if (tls_) {
        http::write(*tls_, req);
        http::read(*tls_, buffer, res);
      } else {
        http::write(*plain_, req);
        http::read(*plain_, buffer, res);
      }
      if (!o_.reuse || !res.keep_alive()) Close();
      if (res.result_int() != 200) return std::nullopt;
      return std::move(res.body());
    } catch (const std::exception&) {
      Close();
      return std::nullopt;
    }
  }

 private:
  void Open() {
    tcp::socket socket(ioc_);
    socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(o_.port)});
    socket.set_option(tcp::no_delay(true));
    if (ctx_) {
      tls_.emplace(std::move(socket), *ctx_);
      tls_->set_verify_callback(ssl::host_name_verification("127.0.0.1"));
      tls_->handshake(ssl::stream_base::client);
    } else {
      plain_.emplace(std::move(socket));
    }
    open_ = true;
  }
  void Close() {
    beast::error_code ignored;
    if (tls_) tls_->next_layer().close(ignored);
    if (plain_) plain_->close(ignored);
    tls_.reset();
    plain_.reset();
    open_ = false;
  }

  net::io_context& ioc_;
  const Options& o_;
  ssl::context* ctx_;
  bool open_ = false;
  std::optional<tcp::socket> plain_;
  std::optional<beast::ssl_stream<tcp::socket>> tls_;
};

// The completion tokens of a streamed response (its usage chunk), or -1.
long StreamedTokens(const std::string& sse) {
  const size_t at = sse.rfind("\"completion_tokens\":");
  if (at == std::string::npos) return -1;
  return std::strtol(sse.c_str() + at + 20, nullptr, 10);
}

void Client(const Options& o, ssl::context* ctx, Clock::time_point end, Totals* t) {
  net::io_context ioc;
  Connection c(ioc, o, ctx);
  const bool stream = o.workload == "stream";
  nlohmann::json body = {{"model", o.model},
                         {"messages", {{{"role", "user"}, {"content", "Say something."}}}},
                         {"max_tokens", stream ? o.tokens : 1}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    body["min_tokens"] = o.tokens;
    body["ignore_eos"] = true;
  }
  const std::string text = body.dump();
  while (Clock::now() < end) {
    std::optional<std::string> r = c.Post(text);
    if (!r) {
      ++t->errors;
      continue;
    }
    ++t->requests;
    if (stream) {
      const long n = StreamedTokens(*r);
      if (n < 0) ++t->errors;
      else t->tokens += n;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Load for bench/server_tls (see bench/server_tls/NOTES.md)"};
  app.add_option("--port", o.port, "spark-engine serve's port on 127.0.0.1")->required();
  app.add_option("--cacert", o.cacert, "TLS: trust this PEM certificate (clear text without)");
  app.add_option("--workload", o.workload, "requests | stream")
      ->check(CLI::IsMember({"requests", "stream"}));
  app.add_option("--concurrency", o.concurrency, "Client threads (default 8)");
  app.add_option("--seconds", o.seconds, "Duration (default 10)");
  app.add_option("--tokens", o.tokens, "Tokens per streamed response (default 64)");
  app.add_flag("--reuse", o.reuse, "Keep one connection per client (keep-alive)");
  app.add_option("--api-key", o.api_key, "Bearer key");
  app.add_option("--model", o.model, "Model name (default demo)");
  CLI11_PARSE(app, argc, argv);
  std::unique_ptr<ssl::context> ctx;
  if (!o.cacert.empty()) {
    ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
    ctx->load_verify_file(o.cacert);
    ctx->set_verify_mode(ssl::verify_peer);
  }
  Totals t;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> clients;
  for (int i = 0; i < o.concurrency; ++i) {
    clients.emplace_back(Client, std::cref(o), ctx.get(), end, &t);
  }
  for (auto& c : clients) c.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::ordered_json out = {{"workload", o.workload},
                                {"tls", !o.cacert.empty()},
                                {"reuse", o.reuse},
                                {"concurrency", o.concurrency},
                                {"seconds", secs},
                                {"requests", t.requests.load()},
                                {"tokens", t.tokens.load()},
                                {"errors", t.errors.load()},
                                {"requests_per_s", t.requests / secs},
                                {"tokens_per_s", t.tokens / secs}};
  std::printf("%s\n", out.dump().c_str());
  return t.errors > 0 ? 2 : 0;
}
