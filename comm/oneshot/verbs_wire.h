// VerbsWire: the one-shot transport's wire over RDMA verbs, for DGX Sparks (ConnectX-7, RoCE
// v2). Each link has one RC queue pair per rail (the twins of the port its cable is on), and
// the whole mailbox is registered once per device. Put posts an RDMA WRITE WITH IMMEDIATE of
// the slot straight into the same slot of the neighbour's mailbox (split over the rails from
// 64 KiB); the immediate (verbs_protocol.h) says which source, call and part it was, and the
// neighbour's progress thread, polling its completion queues, publishes the flag once every
// part of a slice is in. The completion of a receive comes after its data is placed (the verbs
// guarantee a flag written by a second plain WRITE would not have), which is why the flag is
// set by the receiver and not written remotely. Abort notes go the same way into the
// neighbour's note area; a failed completion (retries exhausted: the peer is gone) takes the
// link down.
// GB10 has no GPUDirect RDMA: the mailbox is host memory (pinned for the device path).
// NOT YET RUN ON RDMA HARDWARE: built and its protocol unit-tested here, without a device.
// Without libibverbs at build time, Connect returns Unimplemented.
// Thread-safety: as Wire.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/oneshot/mailbox.h"
#include "comm/oneshot/route.h"
#include "comm/oneshot/verbs_protocol.h"
#include "comm/oneshot/wire.h"

namespace spark::comm::oneshot {

// Slices from this size on are split over the rails of a link.
inline constexpr size_t kStripeMinBytes = 64 << 10;

class VerbsWire : public Wire {
 public:
  // Collective over `exchange`. rails[l] are link l's rails (one entry serves every link).
  // NotFound (no such device, listing those there are), Unavailable (a verbs call, naming the
  // device and the likely cause), Unimplemented (built without libibverbs).
  static Result<std::unique_ptr<VerbsWire>> Connect(const RoutePlan& route, Mailbox* mailbox,
                                                    const std::vector<std::vector<RailSpec>>& rails,
                                                    const Exchange& exchange,
                                                    std::chrono::milliseconds timeout);
  ~VerbsWire() override;

  std::string name() const override { return "rdma"; }
  std::string Describe(int link) const override;
  void Start(WireSink* sink) override;
  Status Put(int link, int source, uint64_t seq, uint32_t bytes) override;
  void SendAbort(int link, const std::string& note) override;
  void Close() override;

  struct State;  // verbs objects (verbs_wire.cc)

 private:
  VerbsWire();
  std::unique_ptr<State> state_;
};

}  // namespace spark::comm::oneshot
