#include "engine/server/http_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <mutex>
#include <type_traits>
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
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr size_t kMaxQueuedWriteBytes = 16 * 1024 * 1024;  // A client that stops reading.
constexpr auto kLingerTime = std::chrono::seconds(1);
// A connection over the limits gets this long to send the request it is refused.
constexpr auto kRefusalTimeout = std::chrono::milliseconds(2000);

std::string ErrorJson(const std::string& message) {
  return "{\"error\": {\"message\": \"" + message +
         "\", \"type\": \"invalid_request_error\", \"param\": null, \"code\": null}}";
}

std::string StatusLine(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

// What a Session needs from the server, shared by all of them.
struct Shared {
  HttpServerOptions options;
  std::shared_ptr<HttpHandler> handler;
  std::shared_ptr<PeerTable> peers;
  std::atomic<int> connections{0};
  std::atomic<int> requests{0};  // Requests whose response is not written yet.
};

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

class SessionBase : public Evictable {
 public:
  virtual void Send(uint64_t ex, HttpResponse r) = 0;
  virtual void StartStream(uint64_t ex, int status, const std::string& content_type) = 0;
  virtual void Write(uint64_t ex, const std::string& data) = 0;
  virtual void EndStream(uint64_t ex) = 0;
  virtual void SetOnGone(uint64_t ex, std::function<void()> on_gone) = 0;
  virtual net::any_io_executor executor() = 0;
};

// One connection. `Stream` is PlainStream or TlsStream; `tls_` keeps a TLS stream's context
// alive (a reload swaps the server's context, not this one's).
template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<Shared> shared, PeerTable::Slot slot, bool loopback,
          int refuse_status, std::shared_ptr<ssl::context> tls)
      : stream_(std::move(stream)),
        shared_(std::move(shared)),
        options_(shared_->options),
        slot_(std::move(slot)),
        loopback_(loopback),
        refuse_status_(refuse_status),
        tls_(std::move(tls)) {
    ++shared_->connections;
  }
  ~Session() override {
    SetCounted(false);
    shared_->peers->Leave(&slot_);
    --shared_->connections;
  }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (std::is_same_v<Stream, TlsStream>) {
        self->SetStage(PeerTable::Stage::kWaiting);
        self->Tcp().expires_after(self->ReadTimeout());
        self->stream_.async_handshake(ssl::stream_base::server,
                                      [self](beast::error_code ec) { self->OnHandshake(ec); });
      } else {
        self->DoRead();
      }
    });
  }
  net::any_io_executor executor() override { return stream_.get_executor(); }
  // Closes the connection unless a request arrived meanwhile, or bytes wait unread: a client
  // that has just sent its request (the monitor's probe) and has not been read yet, rather
  // than one holding the connection open; its read completes next.
  void Evict() override {
    net::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      auto self = weak.lock();
      if (!self || self->active_) return;
      beast::error_code ec;
      if (self->Tcp().socket().available(ec) > 0 && !ec) return;
      self->Close();
    });
  }
  // Only handed on to Exchanges (a Session holding its own context would never be freed).
  void set_io_context(std::weak_ptr<net::io_context> ioc) { weak_ioc_ = std::move(ioc); }

  void Send(uint64_t ex, HttpResponse r) override;
  void StartStream(uint64_t ex, int status, const std::string& content_type) override;
  void Write(uint64_t ex, const std::string& data) override;
  void EndStream(uint64_t ex) override;
  void SetOnGone(uint64_t ex, std::function<void()> on_gone) override;

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }
  std::chrono::milliseconds ReadTimeout() const {
    return refuse_status_ ? std::min(options_.request_timeout, kRefusalTimeout)
                          : options_.request_timeout;
  }
  void OnHandshake(beast::error_code ec);
  void DoRead();
  void OnHeader(beast::error_code ec);
  void OnRead(beast::error_code ec);
  bool ReadError(beast::error_code ec);
  void Dispatch(HttpRequest r);
  void SendError(int status, const std::string& message, bool retry_after = false);
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
  void SetStage(PeerTable::Stage stage) {
    shared_->peers->SetStage(&slot_, stage, this->weak_from_this());
  }
  bool Current(uint64_t ex) const { return ex == exchange_ && active_ && !closed_; }
  void SetCounted(bool counted) {
    if (counted != counted_) shared_->requests += counted ? 1 : -1;
    counted_ = counted;
    if (!counted) shared_->peers->EndRequest(&slot_);
  }

  Stream stream_;
  std::shared_ptr<Shared> shared_;
  const HttpServerOptions& options_;
  PeerTable::Slot slot_;
  const bool loopback_;
  const int refuse_status_;  // 429/503: answer the first request with it, then close.
  std::shared_ptr<ssl::context> tls_;
  bool counted_ = false;  // This session's request is in shared_->requests.
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
  Exchange(std::shared_ptr<net::io_context> ioc, std::shared_ptr<SessionBase> s, uint64_t id)
      : ioc_(std::move(ioc)), session_(s), executor_(s->executor()), id_(id) {}
  void Send(HttpResponse r) override {
    Post([r = std::move(r)](SessionBase& s, uint64_t id) mutable { s.Send(id, std::move(r)); });
  }
  void StartStream(int status, std::string ct) override {
    Post([status, ct = std::move(ct)](SessionBase& s, uint64_t id) {
      s.StartStream(id, status, ct);
    });
  }
  void Write(std::string data) override {
    Post([d = std::move(data)](SessionBase& s, uint64_t id) { s.Write(id, d); });
  }
  void EndStream() override {
    Post([](SessionBase& s, uint64_t id) { s.EndStream(id); });
  }
  void OnClientGone(std::function<void()> f) override {
    Post([f = std::move(f)](SessionBase& s, uint64_t id) mutable {
      s.SetOnGone(id, std::move(f));
    });
  }

 private:
  template <typename F>
  void Post(F f) {
    net::post(executor_, [weak = session_, id = id_, f = std::move(f)]() mutable {
      if (std::shared_ptr<SessionBase> s = weak.lock()) f(*s, id);
    });
  }
  std::shared_ptr<net::io_context> ioc_;
  std::weak_ptr<SessionBase> session_;
  net::any_io_executor executor_;
  const uint64_t id_;
};

template <typename Stream>
void Session<Stream>::OnHandshake(beast::error_code ec) {
  if (!ec) return DoRead();
  if (IsPlainHttpOnTls(ec)) {  // Say so in plain HTTP, then close.
    closed_ = true;
    auto text = std::make_shared<std::string>(
        StatusLine(400) +
        "Content-Type: text/plain\r\nConnection: close\r\nContent-Length: 47\r\n\r\n"
        "This port serves HTTPS only: use https:// URLs\n");
    Tcp().expires_after(kLingerTime);
    net::async_write(Tcp(), net::buffer(*text),
                     [self = this->shared_from_this(), text](beast::error_code, size_t) {
                       beast::error_code ignored;
                       self->Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
                       self->Tcp().socket().close(ignored);
                     });
    return;
  }
  Close();  // A failed handshake (wrong protocol, no client certificate, timeout).
}

template <typename Stream>
void Session<Stream>::DoRead() {
  if (closed_) return;
  SetStage(PeerTable::Stage::kWaiting);
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
  parser_->body_limit(options_.max_body_bytes);
  Tcp().expires_after(ReadTimeout());
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = this->shared_from_this()](beast::error_code ec, size_t) {
                            self->OnHeader(ec);
                          });
}

// True when `ec` ended the connection (answered or closed).
template <typename Stream>
bool Session<Stream>::ReadError(beast::error_code ec) {
  if (!ec) return false;
  if (ec == http::error::header_limit) {
    SendError(431, "request headers too large");
  } else if (ec == http::error::body_limit) {
    SendError(413, "request body too large");
  } else if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
             ec == net::error::eof || ec == net::error::operation_aborted ||
             ec == net::error::connection_reset || ec == ssl::error::stream_truncated) {
    Close();
  } else {
    SendError(400, "malformed HTTP request");
  }
  return true;
}

template <typename Stream>
void Session<Stream>::OnHeader(beast::error_code ec) {
  if (ReadError(ec)) return;
  SetStage(PeerTable::Stage::kBody);
  if (parser_->is_done()) return OnRead(ec);
  http::async_read(stream_, buffer_, *parser_,
                   [self = this->shared_from_this()](beast::error_code ec, size_t) {
                     self->OnRead(ec);
                   });
}

template <typename Stream>
void Session<Stream>::OnRead(beast::error_code ec) {
  if (ReadError(ec)) return;
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
  r.peer = slot_.peer;
  r.peer_loopback = loopback_;
  keep_alive_ = req.keep_alive();
  Dispatch(std::move(r));
}

template <typename Stream>
void Session<Stream>::Dispatch(HttpRequest r) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  const auto& exempt = options_.loopback_exempt_paths;
  const bool exempt_path =
      loopback_ && std::find(exempt.begin(), exempt.end(), path) != exempt.end();
  if (refuse_status_ && !exempt_path) {
    return SendError(refuse_status_,
                     refuse_status_ == 429 ? "too many connections from " + slot_.peer
                                           : "server connection table full",
                     true);
  }
  if (!shared_->peers->BeginRequest(&slot_, exempt_path)) {
    return SendError(429, "too many requests in flight from " + slot_.peer, true);
  }
  SetStage(PeerTable::Stage::kActive);
  ++exchange_;
  active_ = true;
  SetCounted(true);
  responded_ = gone_ = end_queued_ = false;
  on_gone_ = nullptr;
  Tcp().expires_never();
  StartWatch();
  (*shared_->handler)(std::move(r), std::make_shared<Exchange>(
                                        weak_ioc_.lock(), this->shared_from_this(), exchange_));
}

template <typename Stream>
void Session<Stream>::SendError(int status, const std::string& message, bool retry_after) {
  SetStage(PeerTable::Stage::kActive);
  ++exchange_;
  active_ = true;
  responded_ = false;
  keep_alive_ = false;
  Tcp().expires_never();
  HttpResponse r;
  r.status = status;
  r.body = ErrorJson(message);
  if (retry_after) {
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
  }
  Send(exchange_, std::move(r));
}

template <typename Stream>
void Session<Stream>::StartWatch() {
  if (watching_ || closed_) return;
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](
                                                     beast::error_code ec, size_t n) {
    self->OnWatch(ec, n);
  });
}

template <typename Stream>
void Session<Stream>::OnWatch(beast::error_code ec, size_t n) {
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

template <typename Stream>
void Session<Stream>::Send(uint64_t ex, HttpResponse r) {
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

template <typename Stream>
void Session<Stream>::StartStream(uint64_t ex, int status, const std::string& content_type) {
  if (!Current(ex) || responded_) return;
  responded_ = true;
  Enqueue(StatusLine(status) + "Server: spark-engine\r\nContent-Type: " + content_type +
          "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n" +
          (keep_alive_ ? "" : "Connection: close\r\n") + "\r\n");
}

template <typename Stream>
void Session<Stream>::Write(uint64_t ex, const std::string& data) {
  if (!Current(ex) || !responded_ || end_queued_ || data.empty()) return;
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  Enqueue(size + data + "\r\n");
}

template <typename Stream>
void Session<Stream>::EndStream(uint64_t ex) {
  if (!Current(ex) || !responded_ || end_queued_) return;
  Enqueue("0\r\n\r\n");
  end_queued_ = true;
}

template <typename Stream>
void Session<Stream>::SetOnGone(uint64_t ex, std::function<void()> on_gone) {
  if (ex != exchange_) return;
  if (gone_) return on_gone();
  on_gone_ = std::move(on_gone);
}

template <typename Stream>
void Session<Stream>::Enqueue(std::string data) {
  queued_bytes_ += data.size();
  writes_.push_back(std::move(data));
  if (queued_bytes_ > kMaxQueuedWriteBytes) return ClientGone();
  if (!writing_) DoWrite();
}

template <typename Stream>
void Session<Stream>::DoWrite() {
  writing_ = true;
  net::async_write(stream_, net::buffer(writes_.front()),
                   [self = this->shared_from_this()](beast::error_code ec, size_t) {
                     self->OnWrite(ec);
                   });
}

template <typename Stream>
void Session<Stream>::OnWrite(beast::error_code ec) {
  if (closed_) return;
  queued_bytes_ -= writes_.front().size();
  writes_.pop_front();
  if (ec) return ClientGone();
  if (!writes_.empty()) return DoWrite();
  writing_ = false;
  if (end_queued_ && active_) FinishExchange();
}

template <typename Stream>
void Session<Stream>::FinishExchange() {
  active_ = false;
  SetCounted(false);
  on_gone_ = nullptr;
  if (watching_) {  // Stop the watch first; OnWatch then continues with AfterExchange.
    cancel_watch_ = true;
    beast::error_code ignored;
    Tcp().socket().cancel(ignored);
    return;
  }
  AfterExchange();
}

template <typename Stream>
void Session<Stream>::AfterExchange() {
  if (keep_alive_) return DoRead();
  Linger();
}

template <typename Stream>
void Session<Stream>::ClientGone() {
  if (closed_) return;
  gone_ = true;
  if (active_ && on_gone_) std::exchange(on_gone_, nullptr)();
  Close();
}

// Half-close, then read and drop what the client still sends, so that it sees our response
// instead of a reset. Over TLS: close_notify, then wait (briefly) for the client's.
template <typename Stream>
void Session<Stream>::Linger() {
  SetStage(PeerTable::Stage::kWaiting);  // Evictable: the response is out.
  Tcp().expires_after(kLingerTime);
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
      self->Close();
    });
  } else {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.async_read_some(net::buffer(discard_),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Linger();
                            });
  }
}

template <typename Stream>
void Session<Stream>::Close() {
  if (closed_) return;
  closed_ = true;
  SetCounted(false);
  beast::error_code ignored;
  Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  Tcp().socket().close(ignored);
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

struct HttpServer::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::shared_ptr<net::io_context> ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::mutex tls_mu;
  std::shared_ptr<ssl::context> tls;  // Null: plain HTTP.
  std::vector<std::thread> threads;
  int port = 0;

  const HttpServerOptions& options() const { return shared->options; }

  void DoAccept() {
    acceptor->async_accept(net::make_strand(*ioc),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == net::error::operation_aborted || !acceptor->is_open())
                               return;
                             if (!ec) OnAccept(std::move(socket));
                             DoAccept();
                           });
  }

  void OnAccept(tcp::socket socket) {
    beast::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) return;  // Already gone.
    PeerTable::Slot slot;
    slot.peer = remote.address().to_string();
    const PeerTable::Admission a = shared->peers->Admit(&slot);
    if (a.verdict == PeerTable::Verdict::kDrop) {
      socket.close(ec);
      return;
    }
    const bool loopback = remote.address().is_loopback();
    socket.set_option(tcp::no_delay(true), ec);  // Small SSE writes go out at once.
    std::shared_ptr<ssl::context> context;
    {
      std::lock_guard lock(tls_mu);
      context = tls;
    }
    if (context) {
      Launch(std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *context), shared,
                                                  std::move(slot), loopback, a.status, context));
    } else {
      Launch(std::make_shared<Session<PlainStream>>(PlainStream(std::move(socket)), shared,
                                                    std::move(slot), loopback, a.status,
                                                    nullptr));
    }
  }

  template <typename S>
  void Launch(std::shared_ptr<S> session) {
    session->set_io_context(ioc);
    session->Start();
  }

  Status Bind() {
    beast::error_code ec;
    const HttpServerOptions& o = options();
    const net::ip::address address = net::ip::make_address(o.host, ec);
    if (ec) return InvalidArgumentError("--host: '" + o.host + "' is not an IP address");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
    acceptor.emplace(net::make_strand(*ioc));
    if (acceptor->open(endpoint.protocol(), ec); !ec) {
      acceptor->set_option(net::socket_base::reuse_address(true), ec);
      acceptor->bind(endpoint, ec);
    }
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return UnavailableError("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                              ": " + ec.message());
    }
    port = acceptor->local_endpoint().port();
    return Status::Ok();
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  const PeerLimits& l = options.limits;
  if (l.max_connections < 1 || l.max_connections_per_peer < 1 || l.max_requests_per_peer < 1 ||
      l.max_refusing < 0) {
    return InvalidArgumentError("connection limits must be >= 1");
  }
  auto impl = std::make_unique<Impl>();
  impl->shared->options = options;
  impl->shared->handler = std::make_shared<HttpHandler>(std::move(handler));
  impl->shared->peers = std::make_shared<PeerTable>(options.limits);
  if (options.tls.enabled()) {
    SPARK_ASSIGN_OR_RETURN(impl->tls, MakeServerTlsContext(options.tls));
  }
  impl->ioc = std::make_shared<net::io_context>(std::max(1, options.io_threads));
  impl->work.emplace(impl->ioc->get_executor());
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

int HttpServer::num_connections() const { return impl_->shared->connections; }

int HttpServer::num_peers() const { return impl_->shared->peers->num_peers(); }

int HttpServer::num_active_requests() const { return impl_->shared->requests; }

Status HttpServer::ReloadTls() {
  if (!impl_->options().tls.enabled()) {
    return FailedPreconditionError("the server does not serve TLS: nothing to reload");
  }
  SPARK_ASSIGN_OR_RETURN(std::shared_ptr<ssl::context> fresh,
                         MakeServerTlsContext(impl_->options().tls));
  std::lock_guard lock(impl_->tls_mu);
  impl_->tls = std::move(fresh);
  return Status::Ok();
}

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
