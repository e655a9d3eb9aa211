// AuthFailures: failed API-key attempts per peer address, so that one address cannot guess keys
// at line rate. Each address has a bucket of `burst` attempts that refills one every `refill`;
// an address with an empty bucket is answered 429 before its key is even looked at. The first
// failure of an address is reported for logging, and again only once its bucket has filled up
// since, so a flood of bad keys makes one log line per address, never one per request. Keys
// themselves never reach this class.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace spark::engine::server {

struct AuthFailureOptions {
  int burst = 10;                            // Failed attempts an address may make at once.
  std::chrono::milliseconds refill{6'000};   // One more attempt per this long (10 a minute).
  size_t max_peers = 16384;                  // Addresses tracked; the oldest are forgotten.
};

class AuthFailures {
 public:
  using Clock = std::chrono::steady_clock;
  explicit AuthFailures(const AuthFailureOptions& options = {}) : options_(options) {}

  // Seconds until `peer` may try a key again; 0 when it may now.
  int RetryAfterSeconds(const std::string& peer, Clock::time_point now);
  // Counts a failed attempt; true when it is the first reported for this address (log it).
  bool Fail(const std::string& peer, Clock::time_point now);
  size_t num_peers() const;

 private:
  struct Entry {
    double tokens = 0;
    Clock::time_point updated;
  };
  void Refill(Entry& e, Clock::time_point now) const;
  void Forget(Clock::time_point now);

  const AuthFailureOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> peers_;
};

}  // namespace spark::engine::server
