#include "comm/oneshot/socket_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "comm/socket.h"

namespace spark::comm::oneshot {
namespace {

constexpr uint32_t kFrameMagic = 0x3157534f;  // "OSW1"
constexpr uint32_t kHelloMagic = 0x3148534f;  // "OSH1"
constexpr uint32_t kMaxNoteBytes = 4096;

enum FrameType : uint8_t { kData = 1, kAbort = 2, kBye = 3 };

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint8_t type = kData;
  uint8_t source = 0;
  uint16_t reserved = 0;
  uint32_t bytes = 0;
  uint32_t reserved2 = 0;
  uint64_t seq = 0;
};
static_assert(sizeof(FrameHeader) == 24);

struct Hello {
  uint32_t magic = kHelloMagic;
  int32_t rank = 0;
  int32_t world = 0;
  int32_t peer = 0;  // the rank the sender believes it talks to
};

// Reads exactly n bytes, blocking. "" on success, else why not.
std::string ReadFull(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return "the connection was closed";
    if (errno == EINTR) continue;
    return std::strerror(errno);
  }
  return "";
}

sockaddr_in Ipv4(const std::string& address, int port, bool* ok) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  *ok = inet_pton(AF_INET, address.c_str(), &a.sin_addr) == 1;
  return a;
}

// Connects to peer:port from local_address, retrying refusals until the deadline.
Result<Socket> ConnectFrom(const std::string& local_address, const std::string& peer, int port,
                           Clock::time_point deadline) {
  bool ok_local = false, ok_peer = false;
  sockaddr_in local = Ipv4(local_address, 0, &ok_local);
  sockaddr_in remote = Ipv4(peer, port, &ok_peer);
  if (!ok_local || !ok_peer) {
    return InvalidArgumentError("one-shot socket wire takes IPv4 addresses: " + local_address +
                                " -> " + peer);
  }
  std::string last = "no attempt";
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return ErrnoError(errno, "socket");
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      return UnavailableError("cannot bind to " + local_address + ": " + std::strerror(errno));
    }
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) == 0) {
      const int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return s;
    }
    last = std::strerror(errno);
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  return DeadlineExceededError("cannot connect from " + local_address + " to " + peer + ":" +
                               std::to_string(port) + ": " + last);
}

Result<Socket> AcceptBefore(const Socket& listener, Clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return DeadlineExceededError("nobody connected");
    pollfd p{listener.fd(), POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno != EINTR) return ErrnoError(errno, "poll");
    if (rc <= 0) continue;
    Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoError(errno, "accept");
    }
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return s;
  }
}

}  // namespace

struct SocketWire::Frame {
  FrameHeader header;
  const uint8_t* payload = nullptr;  // data frames: the mailbox slot
  std::string note;                  // abort frames
  size_t sent = 0;                   // bytes of header + payload already sent
};

struct SocketWire::Link {
  int peer = 0;
  std::string where;  // "198.18.0.2:40123"
  Socket socket;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Frame> queue;
  bool stop = false;
  bool down = false;
  std::atomic<bool> closing{false};
  bool bye_seen = false;  // receiver thread only
  std::thread receiver;
  std::thread sender;
};

namespace {

// One non-blocking attempt to send the rest of `frame`. 1 done, 0 partial, -1 failed (errno).
template <typename FrameT>
int TrySend(int fd, FrameT& frame) {
  const uint8_t* payload = frame.header.type == kAbort
                               ? reinterpret_cast<const uint8_t*>(frame.note.data())
                               : frame.payload;
  const size_t total = sizeof(FrameHeader) + frame.header.bytes;
  while (frame.sent < total) {
    iovec iov[2];
    int n = 0;
    if (frame.sent < sizeof(FrameHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&frame.header) + frame.sent,
                  sizeof(FrameHeader) - frame.sent};
      if (frame.header.bytes > 0) iov[n++] = {const_cast<uint8_t*>(payload), frame.header.bytes};
    } else {
      const size_t off = frame.sent - sizeof(FrameHeader);
      iov[n++] = {const_cast<uint8_t*>(payload) + off, frame.header.bytes - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t rc = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (rc > 0) {
      frame.sent += static_cast<size_t>(rc);
      continue;
    }
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  return 1;
}

}  // namespace

SocketWire::SocketWire(const RoutePlan& route, Mailbox* mailbox)
    : route_(route), mailbox_(mailbox) {}

SocketWire::~SocketWire() { Close(); }

std::string SocketWire::Describe(int link) const {
  return "rank " + std::to_string(links_[link]->peer) + " at " + links_[link]->where;
}

Result<std::unique_ptr<SocketWire>> SocketWire::Connect(const RoutePlan& route, Mailbox* mailbox,
                                                        const std::vector<std::string>& addresses,
                                                        const Exchange& exchange,
                                                        std::chrono::milliseconds timeout) {
  const int links = route.link_count();
  if (addresses.size() != 1 && static_cast<int>(addresses.size()) != links) {
    return InvalidArgumentError("one-shot socket wire: " + std::to_string(addresses.size()) +
                                " addresses for " + std::to_string(links) +
                                " links (give one address, or one per link)");
  }
  auto address = [&](int l) { return addresses.size() == 1 ? addresses[0] : addresses[l]; };
  std::unique_ptr<SocketWire> w(new SocketWire(route, mailbox));
  std::vector<Socket> listeners(links);
  std::ostringstream mine;
  for (int l = 0; l < links; ++l) {
    SPARK_ASSIGN_OR_RETURN(listeners[l], Listen(address(l), 0));
    SPARK_ASSIGN_OR_RETURN(int port, LocalPort(listeners[l]));
    mine << route.peers[l] << ' ' << address(l) << ' ' << port << '\n';
    auto link = std::make_unique<Link>();
    link->peer = route.peers[l];
    w->links_.push_back(std::move(link));
  }
  SPARK_ASSIGN_OR_RETURN(std::vector<std::string> all, exchange(mine.str()));
  const auto deadline = Clock::now() + timeout;
  // The rank on the left end of a ring or line link connects; in a mesh the lower rank does.
  auto connects = [&](int l) {
    const int peer = route.peers[l];
    if (route.topology == Topology::kMesh) return route.rank < peer;
    return peer == (route.rank + 1) % route.world;
  };
  for (int l = 0; l < links; ++l) {
    if (!connects(l)) continue;
    const int peer = route.peers[l];
    std::istringstream theirs(all[peer]);
    int their_peer = -1, port = 0;
    std::string their_address;
    bool found = false;
    while (theirs >> their_peer >> their_address >> port) {
      if (their_peer == route.rank) {
        found = true;
        break;
      }
    }
    if (!found) {
      return InternalError("one-shot: rank " + std::to_string(peer) +
                           " has no link to rank " + std::to_string(route.rank) +
                           " (the ranks disagree on the topology)");
    }
    Link& link = *w->links_[l];
    link.where = their_address + ":" + std::to_string(port);
    auto s = ConnectFrom(address(l), their_address, port, deadline);
    if (!s.ok()) return s.status().WithContext("one-shot link to rank " + std::to_string(peer));
    link.socket = std::move(*s);
    Hello hello{kHelloMagic, route.rank, route.world, peer};
    SPARK_RETURN_IF_ERROR(SendAll(link.socket, &hello, sizeof(hello), deadline, link.where));
  }
  for (int l = 0; l < links; ++l) {
    if (connects(l)) continue;
    const int peer = route.peers[l];
    Link& link = *w->links_[l];
    auto s = AcceptBefore(listeners[l], deadline);
    if (!s.ok()) {
      return DeadlineExceededError("one-shot: rank " + std::to_string(peer) +
                                   " never connected to " + address(l) + " within " +
                                   std::to_string(timeout.count()) + " ms (" +
                                   s.status().message() + ")");
    }
    Hello hello;
    SPARK_RETURN_IF_ERROR(RecvAll(*s, &hello, sizeof(hello), deadline, "rank " +
                                                                           std::to_string(peer)));
    if (hello.magic != kHelloMagic || hello.rank != peer || hello.world != route.world ||
        hello.peer != route.rank) {
      return UnavailableError("one-shot: a connection on " + address(l) + " said rank " +
                              std::to_string(hello.rank) + " of " + std::to_string(hello.world) +
                              ", expected rank " + std::to_string(peer) + " of " +
                              std::to_string(route.world));
    }
    link.socket = std::move(*s);
    link.where = address(l) + " (accepted)";
  }
  return w;
}

void SocketWire::Start(WireSink* sink) {
  sink_ = sink;
  for (int l = 0; l < static_cast<int>(links_.size()); ++l) {
    links_[l]->receiver = std::thread([this, l] { ReceiveLoop(l); });
    links_[l]->sender = std::thread([this, l] { SendLoop(l); });
  }
}

Status SocketWire::Enqueue(Link& link, Frame frame) {
  std::lock_guard<std::mutex> lock(link.mu);
  if (link.down || link.stop) {
    return UnavailableError("one-shot link to rank " + std::to_string(link.peer) + " (" +
                            link.where + ") is down");
  }
  if (link.queue.empty()) {
    const int rc = TrySend(link.socket.fd(), frame);
    if (rc == 1) return Status::Ok();
    if (rc < 0) {
      link.down = true;
      return UnavailableError("one-shot send to rank " + std::to_string(link.peer) + " (" +
                              link.where + "): " + std::strerror(errno));
    }
  }
  link.queue.push_back(std::move(frame));
  link.cv.notify_one();
  return Status::Ok();
}

Status SocketWire::Put(int link, int source, uint64_t seq, uint32_t bytes) {
  Frame f;
  f.header.type = kData;
  f.header.source = static_cast<uint8_t>(source);
  f.header.bytes = bytes;
  f.header.seq = seq;
  f.payload = mailbox_->Slot(Mailbox::Parity(seq), source);
  return Enqueue(*links_[link], std::move(f));
}

void SocketWire::SendAbort(int link, const std::string& note) {
  Frame f;
  f.header.type = kAbort;
  f.note = note.substr(0, kMaxNoteBytes);
  f.header.bytes = static_cast<uint32_t>(f.note.size());
  Enqueue(*links_[link], std::move(f)).IgnoreError();  // best effort: the link may be gone
}

void SocketWire::SendLoop(int l) {
  Link& link = *links_[l];
  std::unique_lock<std::mutex> lock(link.mu);
  while (true) {
    link.cv.wait(lock, [&] { return link.stop || !link.queue.empty(); });
    if (link.queue.empty() || link.down) {
      if (link.stop) return;
      link.queue.clear();
      continue;
    }
    const int rc = TrySend(link.socket.fd(), link.queue.front());
    if (rc == 1) {
      link.queue.pop_front();
      link.cv.notify_all();  // Close waits for the queue to drain
      continue;
    }
    if (rc < 0) {
      link.down = true;
      link.queue.clear();
      link.cv.notify_all();
      continue;
    }
    lock.unlock();
    pollfd p{link.socket.fd(), POLLOUT, 0};
    ::poll(&p, 1, 50);
    lock.lock();
  }
}

void SocketWire::ReceiveLoop(int l) {
  Link& link = *links_[l];
  const int fd = link.socket.fd();
  auto fail = [&](const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(link.mu);
      link.down = true;
    }
    if (!link.closing.load()) sink_->OnLinkDown(l, why, link.bye_seen);
  };
  while (true) {
    FrameHeader h;
    if (std::string why = ReadFull(fd, &h, sizeof(h)); !why.empty()) return fail(why);
    if (h.magic != kFrameMagic) return fail("garbage on the connection (not a one-shot frame)");
    if (h.type == kBye) {
      link.bye_seen = true;
      continue;
    }
    if (h.type == kAbort) {
      if (h.bytes > kMaxNoteBytes) return fail("abort note too long");
      std::string note(h.bytes, '\0');
      if (std::string why = ReadFull(fd, note.data(), h.bytes); !why.empty()) return fail(why);
      sink_->OnAbort(l, note);
      continue;
    }
    if (h.type != kData || h.source >= route_.world || h.source == route_.rank ||
        h.bytes > mailbox_->capacity()) {
      return fail("bad frame (type " + std::to_string(h.type) + ", source " +
                  std::to_string(h.source) + ", " + std::to_string(h.bytes) + " bytes)");
    }
    uint8_t* slot = mailbox_->Slot(Mailbox::Parity(h.seq), h.source);
    if (std::string why = ReadFull(fd, slot, h.bytes); !why.empty()) return fail(why);
    sink_->OnSlice(l, h.source, h.seq, h.bytes);
  }
}

void SocketWire::Close() {
  if (closed_) return;
  closed_ = true;
  for (auto& link : links_) {
    if (!link->socket.valid()) continue;
    Frame bye;
    bye.header.type = kBye;
    Enqueue(*link, std::move(bye)).IgnoreError();
  }
  // Give the goodbyes a moment to leave, so neighbours see a clean close.
  const auto drain_until = Clock::now() + std::chrono::milliseconds(500);
  for (auto& link : links_) {
    std::unique_lock<std::mutex> lock(link->mu);
    link->cv.wait_until(lock, drain_until, [&] { return link->queue.empty() || link->down; });
    link->stop = true;
    link->closing = true;
    link->cv.notify_all();
  }
  for (auto& link : links_) {
    if (link->sender.joinable()) link->sender.join();
    link->socket.Shutdown();
    if (link->receiver.joinable()) link->receiver.join();
  }
}

}  // namespace spark::comm::oneshot
