#include "comm/rendezvous_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "base/logging.h"

namespace spark::comm {

namespace {

// Connections idle between requests for as long as the job runs; a day bounds a lost peer.
constexpr auto kIdleLimit = std::chrono::hours(24);

Status RecvU32(const Socket& s, uint32_t* v, Clock::time_point deadline) {
  return RecvAll(s, v, sizeof(*v), deadline, "rendezvous client");
}

Status RecvBytes(const Socket& s, std::vector<char>* out, Clock::time_point deadline) {
  uint32_t len = 0;
  SPARK_RETURN_IF_ERROR(RecvU32(s, &len, deadline));
  if (len > kMaxStoreValueBytes) return InvalidArgumentError("rendezvous value too large");
  out->resize(len);
  return RecvAll(s, out->data(), len, deadline, "rendezvous client");
}

Status SendReply(const Socket& s, StoreReply code, const std::vector<char>& value) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::vector<char> frame(1 + sizeof(uint32_t) + value.size());
  frame[0] = static_cast<char>(code);
  const uint32_t len = static_cast<uint32_t>(value.size());
  std::memcpy(frame.data() + 1, &len, sizeof(len));
  if (!value.empty()) std::memcpy(frame.data() + 1 + sizeof(len), value.data(), value.size());
  return SendAll(s, frame.data(), frame.size(), deadline, "rendezvous client");
}

}  // namespace

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const std::string& host,
                                                                  int port) {
  SPARK_ASSIGN_OR_RETURN(Socket listener, Listen(host, port));
  SPARK_ASSIGN_OR_RETURN(int bound_port, LocalPort(listener));
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(std::move(listener), bound_port));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  Logger("engine.comm")->debug("rendezvous store serving on {}:{}", host, bound_port);
  return server;
}

void RendezvousServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Waiting GETs answer NOT_FOUND now, so their ranks report a missing key, not a lost link.
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(1), [&] { return gets_in_flight_ == 0; });
    for (auto& conn : conns_) conn->Shutdown();
    threads.swap(conn_threads_);
    cv_.notify_all();
  }
  for (auto& t : threads) t.join();
  listener_.Close();
}

void RendezvousServer::AcceptLoop() {
  while (!stopping_) {
    pollfd pfd{listener_.fd(), POLLIN, 0};
    if (poll(&pfd, 1, 50) <= 0) continue;
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    auto conn = std::make_shared<Socket>(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    conns_.push_back(conn);
    conn_threads_.emplace_back([this, conn] { Serve(conn); });
  }
}

void RendezvousServer::Serve(std::shared_ptr<Socket> conn) {
  while (!stopping_ && HandleOne(*conn)) {
  }
  conn->Shutdown();
}

bool RendezvousServer::HandleOne(const Socket& conn) {
  const auto deadline = Clock::now() + kIdleLimit;
  uint8_t op = 0;
  std::vector<char> key;
  std::vector<char> value;
  uint32_t wait_ms = 0;
  if (!RecvAll(conn, &op, 1, deadline, "rendezvous client").ok()) return false;
  if (!RecvBytes(conn, &key, deadline).ok()) return false;
  if (!RecvBytes(conn, &value, deadline).ok()) return false;
  if (!RecvU32(conn, &wait_ms, deadline).ok()) return false;
  const std::string key_text(key.begin(), key.end());
  if (op == static_cast<uint8_t>(StoreOp::kSet)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      store_[key_text] = std::move(value);
    }
    cv_.notify_all();
    return SendReply(conn, StoreReply::kOk, {}).ok();
  }
  if (op == static_cast<uint8_t>(StoreOp::kGet)) {
    std::vector<char> found;
    const bool ok = WaitAndGet(key_text, wait_ms, &found);
    const bool sent = SendReply(conn, ok ? StoreReply::kOk : StoreReply::kNotFound, found).ok();
    std::lock_guard<std::mutex> lock(mu_);
    --gets_in_flight_;
    cv_.notify_all();
    return sent;
  }
  return false;  // Unknown op: the client speaks another protocol; drop it.
}

bool RendezvousServer::WaitAndGet(const std::string& key, uint32_t wait_ms,
                                  std::vector<char>* value) {
  std::unique_lock<std::mutex> lock(mu_);
  ++gets_in_flight_;
  const bool present = cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                                    [&] { return stopping_ || store_.count(key) > 0; });
  if (!present || stopping_) return false;
  *value = store_[key];
  return true;
}

}  // namespace spark::comm
