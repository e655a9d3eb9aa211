// Setting up a one-shot Transport for one rank: the route from the topology, the mailbox, and
// the wire (socket or RDMA verbs) connected through an exchange over an already connected
// Communicator (Gloo, or the local group of threads), which the one-shot path falls back to for
// everything it does not carry (oneshot_communicator.h).
// Thread-safety: functions; ConnectTransport is collective (every rank calls it).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/communicator.h"
#include "comm/oneshot/mailbox.h"
#include "comm/oneshot/route.h"
#include "comm/oneshot/transport.h"
#include "comm/oneshot/verbs_wire.h"
#include "comm/oneshot/wire.h"

namespace spark::comm::oneshot {

struct OneShotOptions {
  Topology topology = Topology::kMesh;
  // "socket" (TCP; anywhere) or "rdma" (RC verbs; ConnectX ports with RoCE).
  std::string wire = "socket";
  // Largest slice in bytes: all-reduces up to this size take the one-shot path.
  size_t capacity_bytes = size_t{1} << 20;
  // Socket wire: the local address of each link (ring and line: the left neighbour's cable,
  // then the right one's; one address serves every link).
  std::vector<std::string> addresses;
  // RDMA wire: the rails of each link, in the same order (one entry serves every link).
  std::vector<std::vector<RailSpec>> rails;
  // RDMA wire: every queue pair's traffic class (RailSpec::traffic_class).
  int traffic_class = 0;
  TransportOptions transport;
  // Where the mailbox lives (pinned host memory for the device path); default HostRegion.
  std::function<Result<Region>(size_t bytes)> region;
};

// What a command line says about the one-shot transport (spark-engine's --oneshot-* flags,
// sparkctl up's profile key engine.collectives): plain text, resolved by ToOptions.
struct OneShotSettings {
  // Tensors up to this many bytes take the one-shot path; 0 = off.
  size_t max_bytes = 0;
  std::string wire = "socket";    // socket or rdma
  std::string topology = "mesh";  // mesh, ring or line
  std::string addresses;          // "A,B" by link; empty: the caller's default address
  std::string rails;              // "dev:gid+dev:gid,..." (rdma)
  int traffic_class = 0;          // rdma: the queue pairs' traffic class, 0-255

  bool enabled() const { return max_bytes > 0; }
  // InvalidArgument naming the flag (--oneshot-max-bytes over 64 MiB, wire, topology, rails).
  Status Validate() const;
  // Options for ConnectTransport: capacity max_bytes, `default_address` when no addresses.
  Result<OneShotOptions> ToOptions(const std::string& default_address,
                                          std::chrono::milliseconds timeout) const;
  // The flags that reproduce these settings (for child ranks).
  std::vector<std::string> Argv() const;
};

// The flag forms of OneShotOptions (netplan/oneshot_links.h renders them): addresses "A,B" (by
// link) and rails "dev:gid+dev:gid,dev:gid+dev:gid" (links by ',', a link's rails by '+').
// InvalidArgument naming the malformed part.
std::vector<std::string> ParseAddresses(const std::string& text);
Result<std::vector<std::vector<RailSpec>>> ParseRails(const std::string& text);

// An Exchange over `comm` (one BroadcastBytes per rank).
Exchange ExchangeOver(Communicator& comm);

// Builds and connects this rank's transport; collective over `exchange`, whose rank and world
// size it takes. InvalidArgument (options), the wire's connection errors naming the peer.
Result<std::unique_ptr<Transport>> ConnectTransport(Communicator& exchange,
                                                    const OneShotOptions& options);

}  // namespace spark::comm::oneshot
