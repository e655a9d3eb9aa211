// PeerTable: the HTTP server's connections and requests per peer address, so that one address
// cannot take the whole connection table or every request slot. Each connection is in one
// stage: kWaiting (no complete request header yet: a fresh or idle keep-alive connection),
// kBody (header read, body pending) or kActive (a request is being answered). Under pressure the
// oldest kWaiting connection, then the oldest kBody one, of the peer at its cap (or, when the
// whole table is full, of the peer holding the most connections) is evicted to make room;
// connections with a request in flight are never evicted. When nothing can be evicted the new
// connection is admitted only to be answered 429 (its peer is at its cap) or 503 (table full)
// with Retry-After, and such refusals are themselves bounded.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace spark::engine::server {

struct PeerLimits {
  int max_connections = 1024;         // All peers together.
  int max_connections_per_peer = 256;  // Open connections from one address.
  int max_requests_per_peer = 128;     // Requests in flight from one address; more: 429.
  int max_refusing = 64;              // Connections being answered 429/503; more: closed at once.
};

// Something the table can ask to close (a connection). Close must be safe from any thread.
class Evictable {
 public:
  virtual ~Evictable() = default;
  virtual void Evict() = 0;
};

class PeerTable {
 public:
  enum class Stage { kNone, kWaiting, kBody, kActive };
  enum class Verdict { kAccept, kRefuse, kDrop };

  // One connection's place in the table; owned by the connection.
  struct Slot {
    std::string peer;
    bool admitted = false;  // Counted against the peer.
    bool refused = false;   // Admitted only to be answered 429/503.
    Stage stage = Stage::kNone;
    uint64_t key = 0;       // Position in its stage's age order.
    bool in_flight = false;
  };
  struct Admission {
    Verdict verdict = Verdict::kAccept;
    int status = 0;  // With kRefuse: 429 (the peer's cap) or 503 (the table is full).
  };

  explicit PeerTable(const PeerLimits& limits) : limits_(limits) {}

  // A new connection from `slot->peer`; evicts as described above. On kAccept and kRefuse the
  // connection must call Leave when it closes.
  Admission Admit(Slot* slot);
  void SetStage(Slot* slot, Stage stage, std::weak_ptr<Evictable> conn);
  // Counts a complete request; false (not counted) when the peer has max_requests_per_peer in
  // flight. `exempt` requests are always counted (loopback /health and /metrics).
  bool BeginRequest(Slot* slot, bool exempt);
  void EndRequest(Slot* slot);
  void Leave(Slot* slot);

  int num_peers() const;
  int num_connections() const;  // Admitted ones.
  int connections_of(const std::string& peer) const;

 private:
  struct Peer {
    int connections = 0;
    int in_flight = 0;
    std::map<uint64_t, std::weak_ptr<Evictable>> waiting, body;  // By age.
  };
  // Removes the slot from its stage's order (mu_ held).
  void Unstage(Peer& p, Slot* slot);
  // The oldest evictable connection of `p`, removed from its order; null when none.
  std::shared_ptr<Evictable> TakeOldest(Peer& p);
  std::shared_ptr<Evictable> TakeFromBusiestPeer();

  const PeerLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Peer> peers_;
  int connections_ = 0;
  int refusing_ = 0;
  uint64_t next_key_ = 1;
};

}  // namespace spark::engine::server
