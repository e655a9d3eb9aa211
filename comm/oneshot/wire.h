// Wire: how the one-shot transport (transport.h) moves a mailbox slot to a neighbour. Each link
// joins this rank to one neighbour of its RoutePlan; Put copies `bytes` of the local slot
// (parity of seq, source) into the same slot of the neighbour's mailbox and then sets its flag,
// so a relay forwards exactly the bytes it received. Two implementations: SocketWire (TCP, one
// connection per link; the simulator and CI) and VerbsWire (RDMA WRITE WITH IMMEDIATE on RC
// queue pairs; DGX Sparks). Arrivals, notes and failures come back through a WireSink, from
// the wire's own threads.
// Thread-safety: Put and SendAbort may be called from any thread (the caller's, and the sink's
// callbacks, which forward).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::comm::oneshot {

// A collective that gives every rank the blob of every rank, in rank order (connection set-up:
// addresses, ports, queue pair numbers). Built over a Communicator by ExchangeOver (setup.h).
using Exchange = std::function<Result<std::vector<std::string>>(const std::string& mine)>;

class WireSink {
 public:
  virtual ~WireSink() = default;
  // The slot (parity of seq, source) now holds `bytes` bytes of call `seq`, received on `link`.
  virtual void OnSlice(int link, int source, uint64_t seq, uint32_t bytes) = 0;
  // The neighbour on `link` gave up and says why.
  virtual void OnAbort(int link, const std::string& note) = 0;
  // The link is gone: `clean` when the neighbour closed its transport on purpose first.
  virtual void OnLinkDown(int link, const std::string& reason, bool clean) = 0;
};

class Wire {
 public:
  virtual ~Wire() = default;
  virtual std::string name() const = 0;  // "socket" or "rdma"
  // "198.18.0.2:40123" or "rocep1s0f0 qp 0x1a2" for messages.
  virtual std::string Describe(int link) const = 0;
  // Starts delivering arrivals to `sink`; once, after every link is connected.
  virtual void Start(WireSink* sink) = 0;
  // Sends the slot (parity of seq, source) to the neighbour on `link`. May return before the
  // bytes left: the transport leaves the slot alone until the protocol says it is safe
  // (mailbox.h). Unavailable when the link is down.
  virtual Status Put(int link, int source, uint64_t seq, uint32_t bytes) = 0;
  // Best effort: tells the neighbour on `link` why this rank gives up.
  virtual void SendAbort(int link, const std::string& note) = 0;
  // Says goodbye on every link and stops the wire's threads. Idempotent.
  virtual void Close() = 0;
};

}  // namespace spark::comm::oneshot
