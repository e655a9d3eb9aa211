#include "engine/server/http_server.h"

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

#include "base/logging.h"

namespace spark::engine::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxQueuedWriteBytes = 16 * 1024 * 1024;  // A client that stops reading.
constexpr auto kLingerTime = std::chrono::seconds(1);

std::string ErrorJson(const std::string& message) {
  return "{\"error\": {\"message\": \"" + message +
         "\", \"type\": \"invalid_request_error\", \"param\": null, \"code\": null}}";
}

std::string StatusLine(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options,
          std::shared_ptr<HttpHandler> handler, std::shared_ptr<std::atomic<int>> connections,
          std::shared_ptr<std::atomic<int>> requests)
      : stream_(std::move(socket)),
        options_(options),
        handler_(std::move(handler)),
        connections_(std::move(connections)),
        requests_(std::move(requests)) {
    ++*connections_;
  }
  ~Session() {
    SetCounted(false);
    --*connections_;
  }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }
  net::any_io_executor executor() { return stream_.get_executor(); }
  // Only handed on to Exchanges (a Session holding its own context would never be freed).
  void set_io_context(std::weak_ptr<net::io_context> ioc) { weak_ioc_ = std::move(ioc); }

  void Send(uint64_t ex, HttpResponse r);
  void StartStream(uint64_t ex, int status, const std::string& content_type);
  void Write(uint64_t ex, const std::string& data);
  void EndStream(uint64_t ex);
  void SetOnGone(uint64_t ex, std::function<void()> on_gone);

 private:
  void DoRead();
  void OnRead(beast::error_code ec);
  void SendError(int status, const std::string& message);
  void StartWatch();
  void OnWatch(beast::error_code ec, size_t n);
  void Enqueue(std::string data);
  void DoWrite();
  void OnWrite(beast::error_code ec);
  void FinishExchange();
  void AfterExchange();
  void ClientGone();
  void Linger();
  void Close();
  bool Current(uint64_t ex) const { return ex == exchange_ && active_ && !closed_; }
  void SetCounted(bool counted) {
    if (counted != counted_) *requests_ += counted ? 1 : -1;
    counted_ = counted;
  }

  beast::tcp_stream stream_;
  const HttpServerOptions options_;
  std::shared_ptr<HttpHandler> handler_;
  std::shared_ptr<std::atomic<int>> connections_;
  std::shared_ptr<std::atomic<int>> requests_;  // Requests whose response is not written yet.
  bool counted_ = false;                        // This session's request is in requests_.
  std::weak_ptr<net::io_context> weak_ioc_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  uint64_t exchange_ = 0;  // Number of the current request on this connection.
  bool active_ = false;    // The current request awaits the end of its response.
  bool responded_ = false;
  bool keep_alive_ = false;
  bool end_queued_ = false;
  bool watching_ = false;  // A read that notices a client hanging up is pending.
  bool cancel_watch_ = false;
  bool gone_ = false;
  bool closed_ = false;
  std::function<void()> on_gone_;
  std::deque<std::string> writes_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  std::array<char, 4096> discard_{};
};

// The ResponseWriter handed to handlers: posts every call onto its session's strand. It keeps
// the io_context alive (a generation may end after the server stopped); posts to a stopped
// context are dropped.
class Exchange : public ResponseWriter {
 public:
  Exchange(std::shared_ptr<net::io_context> ioc, std::shared_ptr<Session> s, uint64_t id)
      : ioc_(std::move(ioc)), session_(s), executor_(s->executor()), id_(id) {}
  void Send(HttpResponse r) override {
    Post([r = std::move(r)](Session& s, uint64_t id) mutable { s.Send(id, std::move(r)); });
  }
  void StartStream(int status, std::string ct) override {
    Post([status, ct = std::move(ct)](Session& s, uint64_t id) { s.StartStream(id, status, ct); });
  }
  void Write(std::string data) override {
    Post([d = std::move(data)](Session& s, uint64_t id) { s.Write(id, d); });
  }
  void EndStream() override {
    Post([](Session& s, uint64_t id) { s.EndStream(id); });
  }
  void OnClientGone(std::function<void()> f) override {
    Post([f = std::move(f)](Session& s, uint64_t id) mutable { s.SetOnGone(id, std::move(f)); });
  }

 private:
  template <typename F>
  void Post(F f) {
    net::post(executor_, [weak = session_, id = id_, f = std::move(f)]() mutable {
      if (std::shared_ptr<Session> s = weak.lock()) f(*s, id);
    });
  }
  std::shared_ptr<net::io_context> ioc_;
  std::weak_ptr<Session> session_;
  net::any_io_executor executor_;
  const uint64_t id_;
};

void Session::DoRead() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
  parser_->body_limit(options_.max_body_bytes);
  stream_.expires_after(options_.request_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void Session::OnRead(beast::error_code ec) {
  if (ec == http::error::header_limit) return SendError(431, "request headers too large");
  if (ec == http::error::body_limit) return SendError(413, "request body too large");
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset) {
    return Close();
  }
  if (ec) return SendError(400, "malformed HTTP request");
  http::request<http::string_body> req = parser_->release();
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(field.value());
  }
  r.body = std::move(req.body());
  keep_alive_ = req.keep_alive();
  ++exchange_;
  active_ = true;
  SetCounted(true);
  responded_ = gone_ = end_queued_ = false;
  on_gone_ = nullptr;
  stream_.expires_never();
  StartWatch();
  (*handler_)(std::move(r),
              std::make_shared<Exchange>(weak_ioc_.lock(), shared_from_this(), exchange_));
}

void Session::SendError(int status, const std::string& message) {
  ++exchange_;
  active_ = true;
  responded_ = false;
  keep_alive_ = false;
  stream_.expires_never();
  HttpResponse r;
  r.status = status;
  r.body = ErrorJson(message);
  Send(exchange_, std::move(r));
}

void Session::StartWatch() {
  if (watching_ || closed_) return;
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void Session::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (cancel_watch_) {  // The response ended: go on with the next request.
    cancel_watch_ = false;
    if (!ec || ec == net::error::operation_aborted) return AfterExchange();
  }
  if (ec) return ClientGone();
  if (buffer_.size() > options_.max_header_bytes + options_.max_body_bytes) return ClientGone();
  if (active_) StartWatch();
}

void Session::Send(uint64_t ex, HttpResponse r) {
  if (!Current(ex) || responded_) return;
  responded_ = true;
  http::response<http::string_body> res{http::int_to_status(static_cast<unsigned>(r.status)), 11};
  res.set(http::field::server, "spark-engine");
  res.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res.set(name, value);
  res.keep_alive(keep_alive_);
  res.body() = std::move(r.body);
  res.prepare_payload();
  std::ostringstream os;
  os << res;
  Enqueue(os.str());
  end_queued_ = true;
}

void Session::StartStream(uint64_t ex, int status, const std::string& content_type) {
  if (!Current(ex) || responded_) return;
  responded_ = true;
  Enqueue(StatusLine(status) + "Server: spark-engine\r\nContent-Type: " + content_type +
          "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n" +
          (keep_alive_ ? "" : "Connection: close\r\n") + "\r\n");
}

void Session::Write(uint64_t ex, const std::string& data) {
  if (!Current(ex) || !responded_ || end_queued_ || data.empty()) return;
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  Enqueue(size + data + "\r\n");
}

void Session::EndStream(uint64_t ex) {
  if (!Current(ex) || !responded_ || end_queued_) return;
  Enqueue("0\r\n\r\n");
  end_queued_ = true;
}

void Session::SetOnGone(uint64_t ex, std::function<void()> on_gone) {
  if (ex != exchange_) return;
  if (gone_) return on_gone();
  on_gone_ = std::move(on_gone);
}

void Session::Enqueue(std::string data) {
  queued_bytes_ += data.size();
  writes_.push_back(std::move(data));
  if (queued_bytes_ > kMaxQueuedWriteBytes) return ClientGone();
  if (!writing_) DoWrite();
}

void Session::DoWrite() {
  writing_ = true;
  net::async_write(
      stream_, net::buffer(writes_.front()),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(beast::error_code ec) {
  if (closed_) return;
  queued_bytes_ -= writes_.front().size();
  writes_.pop_front();
  if (ec) return ClientGone();
  if (!writes_.empty()) return DoWrite();
  writing_ = false;
  if (end_queued_ && active_) FinishExchange();
}

void Session::FinishExchange() {
  active_ = false;
  SetCounted(false);
  on_gone_ = nullptr;
  if (watching_) {  // Stop the watch first; OnWatch then continues with AfterExchange.
    cancel_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  AfterExchange();
}

void Session::AfterExchange() {
  if (keep_alive_) return DoRead();
  Linger();
}

void Session::ClientGone() {
  if (closed_) return;
  gone_ = true;
  if (active_ && on_gone_) std::exchange(on_gone_, nullptr)();
  Close();
}

// Half-close, then read and drop what the client still sends, so that it sees our response
// instead of a reset.
void Session::Linger() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTime);
  stream_.async_read_some(net::buffer(discard_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->Linger();
                          });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  SetCounted(false);
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  std::shared_ptr<net::io_context> ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::shared_ptr<HttpHandler> handler;
  std::shared_ptr<std::atomic<int>> connections = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> requests = std::make_shared<std::atomic<int>>(0);
  std::vector<std::thread> threads;
  int port = 0;

  void DoAccept() {
    acceptor->async_accept(net::make_strand(*ioc),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == net::error::operation_aborted || !acceptor->is_open())
                               return;
                             if (!ec) {
                               if (*connections >= options.max_connections) {
                                 beast::error_code ignored;
                                 socket.close(ignored);
                               } else {
                                 auto session = std::make_shared<Session>(
                                     std::move(socket), options, handler, connections, requests);
                                 session->set_io_context(ioc);
                                 session->Start();
                               }
                             }
                             DoAccept();
                           });
  }

  Status Bind() {
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(options.host, ec);
    if (ec) return InvalidArgumentError("--host: '" + options.host + "' is not an IP address");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
    acceptor.emplace(net::make_strand(*ioc));
    if (acceptor->open(endpoint.protocol(), ec); !ec) {
      acceptor->set_option(net::socket_base::reuse_address(true), ec);
      acceptor->bind(endpoint, ec);
    }
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return UnavailableError("cannot listen on " + options.host + ":" +
                              std::to_string(options.port) + ": " + ec.message());
    }
    port = acceptor->local_endpoint().port();
    return Status::Ok();
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->ioc = std::make_shared<net::io_context>(std::max(1, options.io_threads));
  impl->work.emplace(impl->ioc->get_executor());
  impl->handler = std::make_shared<HttpHandler>(std::move(handler));
  SPARK_RETURN_IF_ERROR(impl->Bind());
  impl->DoAccept();
  for (int i = 0; i < std::max(1, options.io_threads); ++i) {
    impl->threads.emplace_back([ioc = impl->ioc] {
      try {
        ioc->run();
      } catch (const std::exception& e) {  // Asio rethrows from handlers; none should throw.
        Logger("server")->error("I/O thread stopped: {}", e.what());
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

int HttpServer::num_connections() const { return *impl_->connections; }

int HttpServer::num_active_requests() const { return *impl_->requests; }

void HttpServer::StopAccepting() {
  std::promise<void> done;
  net::dispatch(impl_->acceptor->get_executor(), [this, &done] {
    beast::error_code ignored;
    impl_->acceptor->close(ignored);
    done.set_value();
  });
  if (!impl_->threads.empty()) done.get_future().wait();
}

void HttpServer::Stop() {
  if (impl_->threads.empty()) return;
  StopAccepting();
  impl_->work.reset();
  impl_->ioc->stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace spark::engine::server
