// Transport: the one-shot all-reduce and all-gather of small messages between the ranks of a
// tensor-parallel group, over a Wire (socket_wire.h, verbs_wire.h) and a Mailbox.
//
// Each call k: this rank copies its slice into its own mailbox slot, puts that slot to every
// neighbour; each neighbour's wire thread publishes what arrives and relays it onward as the
// RoutePlan says (ring: the neighbours' hosts carry the slices of non-adjacent ranks). The
// caller then waits, source by source in rank order, for slot k's flag and adds: the sum is
// ((x0 + x1) + x2) + ... on every rank, bit-identical across ranks and runs. One wire hop per
// neighbour instead of NCCL's 2(n-1) ring steps: what small decode all-reduces need.
//
// Failure is closed: a wait that outlives the timeout, a size that differs between ranks, a
// link that drops or a note from a neighbour that gave up breaks the transport for good; the
// error names the missing rank (and its relay) and is flooded to the neighbours, so every rank
// fails with it instead of waiting for its own deadline. A broken transport refuses every
// later call with the first error.
// The device path (comm/oneshot_cuda) drives the same protocol one step at a time: Reserve a
// sequence number, fill the own slot, Send, then WaitFor each source.
// Thread-safety: calls from one thread at a time (the rank's engine thread); the wire's threads
// call the WireSink methods.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "comm/oneshot/mailbox.h"
#include "comm/oneshot/route.h"
#include "comm/oneshot/wire.h"

namespace spark::comm::oneshot {

struct TransportOptions {
  // Longest wait for one source's slice of a call: past it the transport fails closed.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // How long a wait polls the flag before it sleeps (latency against CPU use).
  std::chrono::microseconds spin = std::chrono::microseconds(200);
};

class Transport : public WireSink {
 public:
  // `wire` writes into `mailbox`; Start is called here.
  Transport(RoutePlan route, std::unique_ptr<Mailbox> mailbox, std::unique_ptr<Wire> wire,
            TransportOptions options);
  ~Transport() override;

  int rank() const { return route_.rank; }
  int world_size() const { return route_.world; }
  const RoutePlan& route() const { return route_; }
  // Largest slice in bytes (per rank: an all-reduce's whole tensor, an all-gather's part).
  size_t capacity() const { return mailbox_->capacity(); }
  Mailbox& mailbox() { return *mailbox_; }
  std::string wire_name() const { return wire_->name(); }

  // In place: data[i] becomes the sum over ranks in rank order. InvalidArgument when the
  // tensor exceeds capacity(); the transport's error otherwise (see above).
  Status AllReduceSum(float* data, size_t count);
  // out + r * count receives rank r's `in`.
  Status AllGather(const float* in, size_t count, float* out);

  // The steps, for callers that stage through the mailbox themselves (the device path):
  // the next call's sequence number (consumed), then Send once the own slot of that sequence
  // holds `bytes`, then WaitFor every other source.
  uint64_t Reserve() { return ++seq_; }
  Status Send(uint64_t seq, uint32_t bytes);
  Status WaitFor(int source, uint64_t seq, uint32_t bytes);
  // Breaks the transport with `reason` and tells the neighbours (idempotent: first wins).
  void Fail(const Status& reason);
  // Ok, or the error that broke the transport.
  Status broken() const { return mailbox_->broken(); }

  // WireSink (the wire's threads).
  void OnSlice(int link, int source, uint64_t seq, uint32_t bytes) override;
  void OnAbort(int link, const std::string& note) override;
  void OnLinkDown(int link, const std::string& reason, bool clean) override;

 private:
  std::string Where(uint64_t seq) const;  // "rank 1: one-shot call 17"
  // What a failed link says of its peer: "rank 2 exited or was killed, or the cable between
  // them is down" (a send, a relay and a dropped connection name it alike).
  std::string Lost(int link) const;
  // Floods `note` to every link but `except`.
  void Flood(const std::string& note, int except);

  const RoutePlan route_;
  std::unique_ptr<Mailbox> mailbox_;
  std::unique_ptr<Wire> wire_;
  const TransportOptions options_;
  uint64_t seq_ = 0;
  std::atomic<bool> flooded_{false};
};

}  // namespace spark::comm::oneshot
