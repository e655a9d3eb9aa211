#include "engine/server/auth_failures.h"

#include <algorithm>
#include <cmath>

namespace spark::engine::server {

void AuthFailures::Refill(Entry& e, Clock::time_point now) const {
  const double gained = std::chrono::duration<double>(now - e.updated) /
                        std::chrono::duration<double>(options_.refill);
  e.tokens = std::min<double>(options_.burst, e.tokens + std::max(0.0, gained));
  e.updated = now;
}

int AuthFailures::RetryAfterSeconds(const std::string& peer, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return 0;
  Refill(it->second, now);
  if (it->second.tokens >= 1) return 0;
  const double wait =
      (1 - it->second.tokens) * std::chrono::duration<double>(options_.refill).count();
  return std::max(1, static_cast<int>(std::ceil(wait)));
}

bool AuthFailures::Fail(const std::string& peer, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = peers_.find(peer);
  const bool first = it == peers_.end();
  if (first) {
    if (peers_.size() >= options_.max_peers) Forget(now);
    it = peers_.emplace(peer, Entry{static_cast<double>(options_.burst), now}).first;
  }
  Refill(it->second, now);
  const bool rested = it->second.tokens >= options_.burst;  // A new episode: report it again.
  it->second.tokens = std::max(0.0, it->second.tokens - 1);
  return first || rested;
}

// Drops the addresses whose buckets are full again, or else the one idle the longest.
void AuthFailures::Forget(Clock::time_point now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    Entry rested = it->second;
    Refill(rested, now);
    it = rested.tokens >= options_.burst ? peers_.erase(it) : std::next(it);
  }
  if (peers_.size() < options_.max_peers) return;
  auto oldest = std::min_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
    return a.second.updated < b.second.updated;
  });
  peers_.erase(oldest);
}

size_t AuthFailures::num_peers() const {
  std::lock_guard lock(mu_);
  return peers_.size();
}

}  // namespace spark::engine::server
