// RendezvousServer: the small TCP key/value store that rank 0 serves so the ranks can find each
// other (Gloo pair addresses, bench parameters). Keys are strings, values are bytes; a GET may
// wait on the server until the key is set or its wait runs out. Wire format:
// docs/engine-runtime.md. One thread accepts, one thread per connection serves; the store lives as
// long as the server. Thread-safety: Start/Stop/port from any thread; Stop is idempotent and joins
// every thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "comm/socket.h"

namespace spark::comm {

// Request/response framing shared by server and client (little-endian):
//   request:  u8 op | u32 key_len | key | u32 value_len | value | u32 wait_ms
//   response: u8 code | u32 value_len | value
enum class StoreOp : uint8_t { kSet = 1, kGet = 2 };
enum class StoreReply : uint8_t { kOk = 0, kNotFound = 1 };
inline constexpr uint32_t kMaxStoreValueBytes = 64u << 20;

class RendezvousServer {
 public:
  // Listens on host:port (port 0 = any free port). Returns Unavailable when the bind fails.
  static Result<std::unique_ptr<RendezvousServer>> Start(const std::string& host, int port);
  ~RendezvousServer() { Stop(); }

  int port() const { return port_; }
  void Stop();

 private:
  RendezvousServer(Socket listener, int port) : listener_(std::move(listener)), port_(port) {}

  void AcceptLoop();
  void Serve(std::shared_ptr<Socket> conn);
  // Handles one request; false when the connection should close.
  bool HandleOne(const Socket& conn);
  // The value of `key`, waiting up to wait_ms for it to be set; nullopt-like false on timeout.
  bool WaitAndGet(const std::string& key, uint32_t wait_ms, std::vector<char>* value);

  Socket listener_;
  const int port_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> store_;
  int gets_in_flight_ = 0;  // GETs between request and reply: Stop lets them answer first.
  std::vector<std::shared_ptr<Socket>> conns_;
  std::vector<std::thread> conn_threads_;
};

}  // namespace spark::comm
