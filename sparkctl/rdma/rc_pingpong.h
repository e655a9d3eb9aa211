// An RC (reliable connected) queue-pair test between two nodes over one RDMA device, what
// ib_send_lat and ib_write_bw measure: ping-pong of small SEND/RECV messages (latency, p50/p99 of
// half the round trip) and a stream of RDMA WRITEs for a fixed time (bandwidth). Both ends call
// RunRcTest with their own device; the QP numbers, GIDs and buffer keys are swapped through
// `exchange` (the caller's TCP connection), which also marks the end of the bandwidth phase.
// RoCE v2 needs the GID index of the IPv4 entry (host::RdmaDeviceFacts::RoceV2Ipv4Index).
// Built without libibverbs, RunRcTest returns Unimplemented. Thread-safety: functions.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::rdma {

struct RcOptions {
  std::string device;  // "rocep1s0f0"
  int port = 1;
  int gid_index = 3;   // RoCE v2 IPv4 entry (found in sysfs; 3 is only the usual value)
  size_t size = 1 << 20;  // bytes per RDMA WRITE in the bandwidth phase
  std::chrono::milliseconds duration{1000};  // bandwidth phase length
  int pingpongs = 1000;
};

struct RcResult {
  std::vector<double> half_rtt_us;  // one per ping-pong of an 8-byte SEND
  double gbps = 0;                // Gbit/s of RDMA WRITE payload (client side)
  size_t bytes = 0;
  double seconds = 0;
};

// Sends `mine` and returns the peer's message (both ends call it in the same order).
using Exchange = std::function<Result<std::string>(const std::string& mine)>;

// Errors name the device and the verbs call: NotFound (no such device), Unavailable (QP
// transitions: wrong GID index, peer unreachable, cabling), DeadlineExceeded (no completion),
// Unimplemented (built without libibverbs).
Result<RcResult> RunRcTest(bool client, const RcOptions& options, const Exchange& exchange);

}  // namespace spark::rdma
