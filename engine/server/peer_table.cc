#include "engine/server/peer_table.h"

#include <algorithm>

namespace spark::engine::server {

PeerTable::Admission PeerTable::Admit(Slot* slot) {
  std::vector<std::shared_ptr<Evictable>> evict;
  Admission out;
  {
    std::lock_guard lock(mu_);
    Peer& p = peers_[slot->peer];
    if (p.connections >= limits_.max_connections_per_peer) {
      if (auto victim = TakeOldest(p)) {
        evict.push_back(std::move(victim));
      } else {
        out = {Verdict::kRefuse, 429};
      }
    } else if (connections_ >= limits_.max_connections) {
      if (auto victim = TakeFromBusiestPeer()) {
        evict.push_back(std::move(victim));
      } else {
        out = {Verdict::kRefuse, 503};
      }
    }
    if (out.verdict == Verdict::kRefuse && refusing_ >= limits_.max_refusing) {
      out = {Verdict::kDrop, 0};
    }
    switch (out.verdict) {
      case Verdict::kAccept:
        ++p.connections;
        ++connections_;
        slot->admitted = true;
        break;
      case Verdict::kRefuse:
        ++refusing_;
        slot->refused = true;
        break;
      case Verdict::kDrop:
        break;
    }
    if (p.connections == 0 && out.verdict != Verdict::kAccept) peers_.erase(slot->peer);
  }
  for (auto& e : evict) e->Evict();  // Outside the lock: Evict posts to the connection.
  return out;
}

void PeerTable::SetStage(Slot* slot, Stage stage, std::weak_ptr<Evictable> conn) {
  if (!slot->admitted) return;
  std::lock_guard lock(mu_);
  Peer& p = peers_[slot->peer];
  Unstage(p, slot);
  slot->stage = stage;
  if (stage == Stage::kWaiting || stage == Stage::kBody) {
    slot->key = next_key_++;
    (stage == Stage::kWaiting ? p.waiting : p.body).emplace(slot->key, std::move(conn));
  }
}

bool PeerTable::BeginRequest(Slot* slot, bool exempt) {
  if (!slot->admitted) return true;
  std::lock_guard lock(mu_);
  Peer& p = peers_[slot->peer];
  if (!exempt && p.in_flight >= limits_.max_requests_per_peer) return false;
  ++p.in_flight;
  slot->in_flight = true;
  return true;
}

void PeerTable::EndRequest(Slot* slot) {
  if (!slot->in_flight) return;
  std::lock_guard lock(mu_);
  --peers_[slot->peer].in_flight;
  slot->in_flight = false;
}

void PeerTable::Leave(Slot* slot) {
  std::lock_guard lock(mu_);
  if (slot->refused) --refusing_;
  slot->refused = false;
  if (!slot->admitted) return;
  auto it = peers_.find(slot->peer);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  Unstage(p, slot);
  if (slot->in_flight) --p.in_flight;
  slot->in_flight = false;
  slot->admitted = false;
  --p.connections;
  --connections_;
  if (p.connections == 0) peers_.erase(it);
}

void PeerTable::Unstage(Peer& p, Slot* slot) {
  if (slot->stage == Stage::kWaiting) p.waiting.erase(slot->key);
  if (slot->stage == Stage::kBody) p.body.erase(slot->key);
  slot->stage = Stage::kNone;
}

std::shared_ptr<Evictable> PeerTable::TakeOldest(Peer& p) {
  for (auto* order : {&p.waiting, &p.body}) {
    while (!order->empty()) {
      std::shared_ptr<Evictable> conn = order->begin()->second.lock();
      order->erase(order->begin());
      if (conn) return conn;
    }
  }
  return nullptr;
}

std::shared_ptr<Evictable> PeerTable::TakeFromBusiestPeer() {
  std::vector<Peer*> order;
  for (auto& [address, p] : peers_) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const Peer* a, const Peer* b) { return a->connections > b->connections; });
  for (Peer* p : order) {
    if (auto conn = TakeOldest(*p)) return conn;
  }
  return nullptr;
}

int PeerTable::num_peers() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(peers_.size());
}

int PeerTable::num_connections() const {
  std::lock_guard lock(mu_);
  return connections_;
}

int PeerTable::connections_of(const std::string& peer) const {
  std::lock_guard lock(mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.connections;
}

}  // namespace spark::engine::server
