#include "comm/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace spark::comm {

namespace {

std::string Address(const std::string& host, int port) { return host + ":" + std::to_string(port); }

// One resolved IPv4/IPv6 stream address.
Result<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* info = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &info);
  if (rc != 0) {
    return InvalidArgumentError("cannot resolve " + Address(host, port) + ": " + gai_strerror(rc));
  }
  return info;
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Waits for `events` on the socket. DeadlineExceeded at the deadline.
Status PollFor(const Socket& socket, short events, Clock::time_point deadline,
               const std::string& peer) {
  while (true) {
    pollfd pfd{socket.fd(), events, 0};
    const int rc = poll(&pfd, 1, MillisLeft(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return DeadlineExceededError("timed out talking to " + peer);
    if (errno != EINTR) return ErrnoError(errno, "poll " + peer);
  }
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.Release();
  }
  return *this;
}

int Socket::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Result<Socket> Listen(const std::string& host, int port) {
  SPARK_ASSIGN_OR_RETURN(addrinfo * info, Resolve(host, port, true));
  Socket socket(::socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, 0));
  if (!socket.valid()) {
    freeaddrinfo(info);
    return ErrnoError(errno, "socket");
  }
  const int one = 1;
  setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int rc = ::bind(socket.fd(), info->ai_addr, info->ai_addrlen);
  const int bind_errno = errno;
  freeaddrinfo(info);
  if (rc != 0) {
    return UnavailableError("cannot listen on " + Address(host, port) + ": " +
                            std::strerror(bind_errno));
  }
  if (::listen(socket.fd(), 128) != 0) return ErrnoError(errno, "listen " + Address(host, port));
  return socket;
}

Result<int> LocalPort(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError(errno, "getsockname");
  }
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Result<Socket> ConnectWithRetry(const std::string& host, int port, Clock::time_point deadline) {
  SPARK_ASSIGN_OR_RETURN(addrinfo * info, Resolve(host, port, false));
  std::string last_error = "no attempt";
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    Socket socket(::socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, 0));
    if (socket.valid() && ::connect(socket.fd(), info->ai_addr, info->ai_addrlen) == 0) {
      freeaddrinfo(info);
      const int one = 1;
      setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return socket;
    }
    last_error = std::strerror(errno);
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  freeaddrinfo(info);
  return DeadlineExceededError("cannot connect to " + Address(host, port) +
                               " before the deadline: " + last_error);
}

Status SendAll(const Socket& socket, const void* data, size_t n, Clock::time_point deadline,
               const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    SPARK_RETURN_IF_ERROR(PollFor(socket, POLLOUT, deadline, peer));
    const ssize_t sent = ::send(socket.fd(), p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0) return UnavailableError("send to " + peer + ": " + std::strerror(errno));
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return Status::Ok();
}

Status RecvAll(const Socket& socket, void* data, size_t n, Clock::time_point deadline,
               const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    SPARK_RETURN_IF_ERROR(PollFor(socket, POLLIN, deadline, peer));
    const ssize_t got = ::recv(socket.fd(), p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return UnavailableError("receive from " + peer + ": " + std::strerror(errno));
    if (got == 0) return UnavailableError(peer + " closed the connection");
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Result<std::string> LocalAddressFor(const std::string& host) {
  SPARK_ASSIGN_OR_RETURN(addrinfo * info, Resolve(host, 9, false));
  Socket socket(::socket(info->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int rc = socket.valid() ? ::connect(socket.fd(), info->ai_addr, info->ai_addrlen) : -1;
  freeaddrinfo(info);
  if (rc != 0) return ErrnoError(errno, "route to " + host);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError(errno, "getsockname");
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw =
      addr.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&addr)->sin_addr);
  inet_ntop(addr.ss_family, raw, text, sizeof(text));
  return std::string(text);
}

}  // namespace spark::comm
