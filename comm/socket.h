// Small blocking TCP helpers for the rendezvous store: an owned fd, listen, connect with retries
// until a deadline, and exact send/receive bounded by a deadline (poll, never a hang).
// Errors name the peer address ("127.0.0.1:29500").
// Thread-safety: a Socket is owned by one thread at a time; Shutdown may be called from another
// thread to wake a blocked reader.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "base/status.h"

namespace spark::comm {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.Release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Close();
  // Wakes any thread blocked on this socket (shutdown(2) of both directions).
  void Shutdown();

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0 = any free port). Returns Unavailable when the bind fails.
Result<Socket> Listen(const std::string& host, int port);
// The port a listening socket is bound to.
Result<int> LocalPort(const Socket& socket);

// Connects to host:port, retrying refused/unreachable connections until the deadline.
// Returns DeadlineExceeded (naming the address and the last error) or InvalidArgument for an
// address that does not resolve.
Result<Socket> ConnectWithRetry(const std::string& host, int port, Clock::time_point deadline);

// Sends/receives exactly n bytes. DeadlineExceeded at the deadline, Unavailable when the peer
// closes or the socket fails. `peer` names the other end in messages.
Status SendAll(const Socket& socket, const void* data, size_t n, Clock::time_point deadline,
               const std::string& peer);
Status RecvAll(const Socket& socket, void* data, size_t n, Clock::time_point deadline,
               const std::string& peer);

// The local IP address the kernel would use to reach `host` (no packet is sent).
Result<std::string> LocalAddressFor(const std::string& host);

}  // namespace spark::comm
