// The node side of `sparkctl bench link` and the selftest's ping-pong: one end serves
// (`spark-bench link-serve`), the other probes it (`spark-bench link-probe`) over one cable:
//   TCP     8-byte ping-pong (p50/p99 of half the round trip), then a stream of `size`-byte
//           writes for `seconds` (Gbit/s of payload, acknowledged by the server at the end);
//   RDMA    the same over an RC queue pair (sparkctl/rdma/rc_pingpong.h), the TCP connection
//           only swapping QP details; used when both ends name a device (--rdma).
// The result says which transport measured it; TCP numbers are never labelled RDMA.
// Thread-safety: functions; one connection per call.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/bench/link_stats.h"

namespace spark::bench {

struct LinkProbeOptions {
  std::string peer;         // probe: the server's fabric address
  std::string bind = "0.0.0.0";  // serve: address to listen on
  int port = 29700;
  std::string rdma_device;  // "" = TCP
  int gid_index = 3;        // RoCE v2 IPv4 GID index of rdma_device
  size_t size = 1 << 20;    // bytes per write in the bandwidth phase
  std::chrono::milliseconds duration{1000};
  int pingpongs = 1000;
  std::chrono::seconds accept_timeout{30};  // serve: give up when no probe arrives
};


// Serves one probe and returns. DeadlineExceeded when none arrives within accept_timeout.
Status ServeLink(const LinkProbeOptions& options);
// Connects to peer:port (retrying while the server starts) and measures.
Result<LinkProbeResult> ProbeLink(const LinkProbeOptions& options);

}  // namespace spark::bench
