// SocketWire: the one-shot transport's wire over TCP, one connection per link of the RoutePlan,
// for machines without RDMA (the simulator, CI, threads on loopback). Frames are a 24-byte
// header (magic, type, source, bytes, seq) and the payload, read by one receiver thread per link
// straight into the mailbox slot. A send is tried at once without blocking; what does not fit in
// the socket buffer is queued for the link's sender thread, so neither the caller nor a relaying
// receiver thread ever blocks on a slow neighbour (its deadline is the waiting side's).
// Connect: each link listens on its local address (any port), the ranks exchange address and
// port per link, the rank on the left of a ring link (the lower rank of a mesh link) connects
// from its own address and says hello (magic, rank), the other accepts and checks the rank.
// Thread-safety: as Wire.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/oneshot/mailbox.h"
#include "comm/oneshot/route.h"
#include "comm/oneshot/wire.h"

namespace spark::comm::oneshot {

class SocketWire : public Wire {
 public:
  // Collective over `exchange`. addresses[l] is the local address of link l (one address for
  // all links when it has one element). Returns InvalidArgument (addresses), Unavailable (bind,
  // connect, a wrong hello) or DeadlineExceeded (a neighbour never connected), naming the peer
  // rank and address.
  static Result<std::unique_ptr<SocketWire>> Connect(const RoutePlan& route, Mailbox* mailbox,
                                                     const std::vector<std::string>& addresses,
                                                     const Exchange& exchange,
                                                     std::chrono::milliseconds timeout);
  ~SocketWire() override;

  std::string name() const override { return "socket"; }
  std::string Describe(int link) const override;
  void Start(WireSink* sink) override;
  Status Put(int link, int source, uint64_t seq, uint32_t bytes) override;
  void SendAbort(int link, const std::string& note) override;
  void Close() override;

 private:
  struct Link;
  struct Frame;
  SocketWire(const RoutePlan& route, Mailbox* mailbox);
  Status Enqueue(Link& link, Frame frame);
  void ReceiveLoop(int link);
  void SendLoop(int link);

  const RoutePlan route_;
  Mailbox* mailbox_;
  WireSink* sink_ = nullptr;
  std::vector<std::unique_ptr<Link>> links_;
  bool closed_ = false;
};

}  // namespace spark::comm::oneshot
