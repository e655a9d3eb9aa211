#include "engine/runtime/memory_guard.h"

#include <algorithm>

#include "base/logging.h"
#include "base/strings.h"

namespace spark::engine::runtime {
namespace {

std::string Bytes(int64_t b) { return HumanBytes(static_cast<uint64_t>(std::max<int64_t>(0, b))); }

}  // namespace

std::string_view GuardStateName(GuardState state) {
  switch (state) {
    case GuardState::kOk:
      return "ok";
    case GuardState::kNoAdmit:
      return "no-admit";
    case GuardState::kShed:
      return "shedding";
  }
  return "?";
}

MemoryGuard::MemoryGuard(MemoryGuardOptions options, GroupMemorySource source,
                         std::function<Clock::time_point()> now)
    : options_(options), source_(std::move(source)), now_(std::move(now)) {
  status_.admit_floor_bytes = options_.admit_floor_bytes;
  status_.hard_floor_bytes = options_.hard_floor_bytes;
}

GuardState MemoryGuard::Next(int64_t available) const {
  const GuardState now = status_.state;
  if (available < options_.hard_floor_bytes) return GuardState::kShed;
  if (now == GuardState::kShed && available < options_.hard_floor_bytes + options_.margin_bytes) {
    return GuardState::kShed;
  }
  if (available < options_.admit_floor_bytes) return GuardState::kNoAdmit;
  if (now != GuardState::kOk && available < options_.admit_floor_bytes + options_.margin_bytes) {
    return GuardState::kNoAdmit;
  }
  return GuardState::kOk;
}

GuardState MemoryGuard::Check() {
  const Clock::time_point now = now_();
  {
    std::lock_guard lock(mu_);
    if (status_.known && now - last_read_ < options_.interval) return status_.state;
  }
  last_read_ = now;
  Result<GroupMemoryReading> reading = source_();
  auto log = Logger("engine.memory");
  std::lock_guard lock(mu_);
  if (!reading.ok()) {
    if (!read_failed_)
      log->warn("memory guard: cannot read memory: {}", reading.status().message());
    read_failed_ = true;
    return status_.state;
  }
  read_failed_ = false;
  const GuardState before = status_.state;
  status_.known = true;
  status_.available_bytes = reading->available_bytes;
  status_.rank = reading->rank;
  status_.state = Next(reading->available_bytes);
  if (status_.state == before) return status_.state;
  const std::string where = Bytes(status_.available_bytes) + " available on rank " +
                            std::to_string(status_.rank) + "'s node";
  switch (status_.state) {
    case GuardState::kNoAdmit:
      if (before == GuardState::kOk) ++status_.no_admit_trips;
      log->warn("memory guard tripped: {}, below the {} admit floor: new sequences wait", where,
                Bytes(options_.admit_floor_bytes));
      break;
    case GuardState::kShed:
      ++status_.shed_trips;
      log->error("memory guard tripped: {}, below the {} hard floor: shedding requests (503)",
                 where, Bytes(options_.hard_floor_bytes));
      break;
    case GuardState::kOk:
      log->info("memory guard: {} again (admit floor {}): admitting", where,
                Bytes(options_.admit_floor_bytes));
      break;
  }
  return status_.state;
}

bool MemoryGuard::TakeShed() {
  const Clock::time_point now = now_();
  std::lock_guard lock(mu_);
  if (status_.state != GuardState::kShed) return false;
  if (last_shed_ != Clock::time_point{} && now - last_shed_ < options_.interval) return false;
  last_shed_ = now;
  ++status_.shed_requests;
  return true;
}

void MemoryGuard::CountShed(uint64_t requests) {
  std::lock_guard lock(mu_);
  status_.shed_requests += requests;
}

std::string MemoryGuard::Describe() const {
  std::lock_guard lock(mu_);
  const bool hard = status_.state == GuardState::kShed;
  return Bytes(status_.available_bytes) + " available on rank " + std::to_string(status_.rank) +
         "'s node, below the " +
         Bytes(hard ? options_.hard_floor_bytes : options_.admit_floor_bytes) +
         (hard ? " hard floor" : " admit floor");
}

MemoryGuardStatus MemoryGuard::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace spark::engine::runtime
