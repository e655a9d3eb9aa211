// MemoryGuard: the steady-state guard of rank 0's engine loop. Before each step it looks at the
// memory the group's nodes still have (the smallest MemAvailable of any rank, cgroup limits
// applied; host_memory.h) and says what the engine may do:
//   ok        admit new sequences as usual;
//   no-admit  below the admit floor (default 3 GiB): running sequences go on, waiting ones wait
//             (they are admitted once memory comes back above the floor plus a margin);
//   shedding  below the hard floor (default 1 GiB): every waiting request and the newest running
//             one are failed with a clear 503, one running request per check interval, until
//             memory comes back.
// Each change of state is logged with the numbers (a "trip"), and counted for /metrics.
// Readings are taken at most once per interval: on a group they cost a collective round.
// Thread-safety: Check() from the engine thread; status() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::engine::runtime {

enum class GuardState { kOk, kNoAdmit, kShed };
std::string_view GuardStateName(GuardState state);  // "ok", "no-admit", "shedding"

// The smallest memory any rank's node has, and whose it is.
struct GroupMemoryReading {
  int64_t available_bytes = 0;
  int rank = 0;
};
using GroupMemorySource = std::function<Result<GroupMemoryReading>()>;

struct MemoryGuardOptions {
  int64_t admit_floor_bytes = int64_t{3} << 30;
  int64_t hard_floor_bytes = int64_t{1} << 30;
  // A state lifts only once memory is this far above its floor, so a node hovering at the floor
  // does not flap between states. Default 256 MiB.
  int64_t margin_bytes = int64_t{256} << 20;
  // Memory is read at most this often. Default 250 ms.
  std::chrono::milliseconds interval{250};
};

struct MemoryGuardStatus {
  GuardState state = GuardState::kOk;
  bool known = false;  // a reading has been taken
  int64_t available_bytes = 0;
  int rank = 0;  // the rank whose node had the least
  int64_t admit_floor_bytes = 0;
  int64_t hard_floor_bytes = 0;
  uint64_t no_admit_trips = 0;  // entries into no-admit (from ok)
  uint64_t shed_trips = 0;      // entries into shedding
  uint64_t shed_requests = 0;   // requests failed by the guard
};

class MemoryGuard {
 public:
  using Clock = std::chrono::steady_clock;
  MemoryGuard(MemoryGuardOptions options, GroupMemorySource source,
              std::function<Clock::time_point()> now = Clock::now);

  // The state for the coming step, reading memory when the last reading is older than the
  // interval. A failed reading keeps the state and is logged (once until readings work again).
  GuardState Check();
  // Whether the guard may shed another running request now (at most one per interval); counts
  // it when true.
  bool TakeShed();
  // Counts waiting requests failed while shedding.
  void CountShed(uint64_t requests);
  // "1.2 GiB available on rank 1's node, below the 3 GiB admit floor".
  std::string Describe() const;
  MemoryGuardStatus status() const;

 private:
  GuardState Next(int64_t available) const;

  const MemoryGuardOptions options_;
  GroupMemorySource source_;
  std::function<Clock::time_point()> now_;
  Clock::time_point last_read_{};
  Clock::time_point last_shed_{};
  bool read_failed_ = false;
  mutable std::mutex mu_;
  MemoryGuardStatus status_;
};

}  // namespace spark::engine::runtime
