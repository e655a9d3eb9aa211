#include "comm/oneshot/mailbox.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace spark::comm::oneshot {
namespace {

size_t Align64(size_t n) { return (n + 63) & ~size_t{63}; }

std::atomic_ref<uint64_t> FlagRef(uint64_t* flags, int index) {
  return std::atomic_ref<uint64_t>(flags[index]);
}

}  // namespace

Result<Region> HostRegion(size_t bytes) {
  const size_t rounded = (bytes + 4095) & ~size_t{4095};
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) {
    return ResourceExhaustedError("one-shot mailbox: cannot allocate " + std::to_string(rounded) +
                                  " bytes");
  }
  std::memset(p, 0, rounded);
  return Region{p, rounded, [](void* q) { std::free(q); }};
}

size_t Mailbox::RegionBytes(int world, size_t capacity) {
  const size_t slots = 2 * world * Align64(capacity);
  return slots + Align64(2 * world * sizeof(uint64_t)) + Align64(2 * world * sizeof(uint32_t)) +
         world * kAbortNoteBytes;
}

Mailbox::Mailbox(Region region, int world, size_t capacity)
    : region_(std::move(region)), world_(world), capacity_(Align64(capacity)) {
  auto* base = static_cast<uint8_t*>(region_.data);
  const size_t slots = slots_bytes();
  flags_ = reinterpret_cast<uint64_t*>(base + slots);
  sizes_ = reinterpret_cast<uint32_t*>(base + slots + Align64(2 * world * sizeof(uint64_t)));
  abort_note_ = reinterpret_cast<char*>(sizes_) + Align64(2 * world * sizeof(uint32_t));
}

Mailbox::~Mailbox() {
  if (region_.data != nullptr && region_.release) region_.release(region_.data);
}

uint8_t* Mailbox::Slot(int parity, int source) const {
  return static_cast<uint8_t*>(region_.data) + SlotOffset(parity, source);
}

void Mailbox::Publish(int source, uint64_t seq, uint32_t bytes) {
  const int index = Parity(seq) * world_ + source;
  std::atomic_ref<uint32_t>(sizes_[index]).store(bytes, std::memory_order_relaxed);
  FlagRef(flags_, index).store(seq, std::memory_order_release);
  // Pairs with the fence in Wait: either the sleeper sees the flag or this sees the sleeper.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

uint64_t Mailbox::Flag(int source, uint64_t seq) const {
  return FlagRef(flags_, Parity(seq) * world_ + source).load(std::memory_order_acquire);
}

Status Mailbox::Wait(int source, uint64_t seq, Clock::time_point deadline,
                     std::chrono::nanoseconds spin) {
  auto done = [&]() -> int {  // 1 arrived, -1 overtaken, 0 not yet
    const uint64_t flag = Flag(source, seq);
    return flag == seq ? 1 : (flag > seq ? -1 : 0);
  };
  const auto spin_until = Clock::now() + spin;
  int state = done();
  while (state == 0 && !is_broken_.load(std::memory_order_acquire) && Clock::now() < spin_until) {
    std::this_thread::yield();
    state = done();
  }
  if (state == 0) {
    std::unique_lock<std::mutex> lock(mu_);
    sleepers_.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while ((state = done()) == 0 && !is_broken_.load(std::memory_order_acquire)) {
      const auto now = Clock::now();
      if (now >= deadline) break;
      // Bounded sleeps: a lost wake-up costs at most one slice, never the whole deadline.
      cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(20)));
    }
    sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (state == 1) return Status::Ok();
  if (state == -1) {
    return InternalError("one-shot slot of rank " + std::to_string(source) +
                         " already holds a later call than " + std::to_string(seq));
  }
  if (is_broken_.load(std::memory_order_acquire)) return broken();
  return DeadlineExceededError("timed out");
}

void Mailbox::Break(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_broken_.load(std::memory_order_relaxed)) return;
    broken_ = reason;
    is_broken_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
}

Status Mailbox::broken() const {
  if (!is_broken_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

}  // namespace spark::comm::oneshot
