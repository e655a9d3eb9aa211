// Node side of the link tests (see link_probe.h).
#include "sparkctl/bench/link_probe.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "comm/socket.h"
#include "sparkctl/rdma/rc_pingpong.h"

namespace spark::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kIo = std::chrono::seconds(30);

Status SendU32(const comm::Socket& s, uint32_t v, const std::string& peer) {
  return comm::SendAll(s, &v, sizeof(v), Clock::now() + kIo, peer);
}
Result<uint32_t> RecvU32(const comm::Socket& s, const std::string& peer) {
  uint32_t v = 0;
  SPARK_RETURN_IF_ERROR(comm::RecvAll(s, &v, sizeof(v), Clock::now() + kIo, peer));
  return v;
}

// Length-prefixed message swap used by the RDMA test; `first` sends before receiving.
rdma::Exchange Swapper(const comm::Socket& s, const std::string& peer, bool first) {
  return [&s, peer, first](const std::string& mine) -> Result<std::string> {
    auto send = [&]() -> Status {
      SPARK_RETURN_IF_ERROR(SendU32(s, mine.size(), peer));
      return comm::SendAll(s, mine.data(), mine.size(), Clock::now() + kIo, peer);
    };
    if (first) SPARK_RETURN_IF_ERROR(send());
    SPARK_ASSIGN_OR_RETURN(uint32_t n, RecvU32(s, peer));
    if (n > 4096) return InternalError(peer + ": oversized link-test message");
    std::string theirs(n, '\0');
    SPARK_RETURN_IF_ERROR(comm::RecvAll(s, theirs.data(), n, Clock::now() + kIo, peer));
    if (!first) SPARK_RETURN_IF_ERROR(send());
    return theirs;
  };
}

rdma::RcOptions RcOpts(const LinkProbeOptions& o) {
  rdma::RcOptions r;
  r.device = o.rdma_device;
  r.gid_index = o.gid_index;
  r.size = o.size;
  r.duration = o.duration;
  r.pingpongs = o.pingpongs;
  return r;
}

Status ServeTcp(const comm::Socket& s, const std::string& peer) {
  SPARK_ASSIGN_OR_RETURN(uint32_t pings, RecvU32(s, peer));
  char msg[8];
  for (uint32_t i = 0; i < pings; ++i) {
    SPARK_RETURN_IF_ERROR(comm::RecvAll(s, msg, 8, Clock::now() + kIo, peer));
    SPARK_RETURN_IF_ERROR(comm::SendAll(s, msg, 8, Clock::now() + kIo, peer));
  }
  std::vector<char> buf;
  for (;;) {
    SPARK_ASSIGN_OR_RETURN(uint32_t n, RecvU32(s, peer));
    if (n == 0) break;
    buf.resize(n);
    SPARK_RETURN_IF_ERROR(comm::RecvAll(s, buf.data(), n, Clock::now() + kIo, peer));
  }
  return SendU32(s, 1, peer);  // everything arrived
}

Result<LinkProbeResult> ProbeTcp(const comm::Socket& s, const LinkProbeOptions& o) {
  LinkProbeResult r;
  r.transport = "tcp";
  SPARK_RETURN_IF_ERROR(SendU32(s, o.pingpongs, o.peer));
  std::vector<double> half_rtt;
  char msg[8] = {};
  for (int i = 0; i < o.pingpongs; ++i) {
    auto t0 = Clock::now();
    SPARK_RETURN_IF_ERROR(comm::SendAll(s, msg, 8, Clock::now() + kIo, o.peer));
    SPARK_RETURN_IF_ERROR(comm::RecvAll(s, msg, 8, Clock::now() + kIo, o.peer));
    half_rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  r.latency = Summarize(half_rtt);
  std::vector<char> chunk(std::max<size_t>(o.size, 1), 'x');
  auto start = Clock::now();
  while (Clock::now() - start < o.duration) {
    SPARK_RETURN_IF_ERROR(SendU32(s, chunk.size(), o.peer));
    SPARK_RETURN_IF_ERROR(comm::SendAll(s, chunk.data(), chunk.size(), Clock::now() + kIo, o.peer));
    r.bytes += chunk.size();
  }
  SPARK_RETURN_IF_ERROR(SendU32(s, 0, o.peer));
  SPARK_RETURN_IF_ERROR(RecvU32(s, o.peer).status());
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.gbps = r.bytes * 8 / 1e9 / r.seconds;
  return r;
}

}  // namespace

Status ServeLink(const LinkProbeOptions& o) {
  SPARK_ASSIGN_OR_RETURN(comm::Socket listener, comm::Listen(o.bind, o.port));
  pollfd p{listener.fd(), POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(o.accept_timeout.count() * 1000));
  if (ready <= 0) {
    return DeadlineExceededError("link-serve " + o.bind + ":" + std::to_string(o.port) +
                                 ": no probe arrived within " +
                                 std::to_string(o.accept_timeout.count()) + " s");
  }
  comm::Socket s(accept(listener.fd(), nullptr, nullptr));
  if (!s.valid()) return ErrnoError(errno, "link-serve accept");
  int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string peer = "probe on " + o.bind;
  SPARK_ASSIGN_OR_RETURN(uint32_t mode, RecvU32(s, peer));
  if (mode == 'R') {
    if (o.rdma_device.empty()) return InvalidArgumentError("probe asked for RDMA; serve without --rdma");
    return rdma::RunRcTest(false, RcOpts(o), Swapper(s, peer, false)).status();
  }
  return ServeTcp(s, peer);
}

Result<LinkProbeResult> ProbeLink(const LinkProbeOptions& o) {
  SPARK_ASSIGN_OR_RETURN(comm::Socket s,
                         comm::ConnectWithRetry(o.peer, o.port, Clock::now() + std::chrono::seconds(15)));
  int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (o.rdma_device.empty()) {
    SPARK_RETURN_IF_ERROR(SendU32(s, 'T', o.peer));
    return ProbeTcp(s, o);
  }
  SPARK_RETURN_IF_ERROR(SendU32(s, 'R', o.peer));
  SPARK_ASSIGN_OR_RETURN(rdma::RcResult rc, rdma::RunRcTest(true, RcOpts(o), Swapper(s, o.peer, true)));
  LinkProbeResult r;
  r.transport = "rdma-rc";
  r.device = o.rdma_device;
  r.latency = Summarize(rc.half_rtt_us);
  r.gbps = rc.gbps;
  r.bytes = rc.bytes;
  r.seconds = rc.seconds;
  return r;
}

}  // namespace spark::bench
