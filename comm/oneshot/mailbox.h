// Mailbox: the registered receive buffer of one rank of the one-shot transport. Every other
// rank's slice of a call lands in its own slot, and a per-slot sequence flag says which call the
// slot holds: peers write the data, then the flag (release), the owner waits for the flag
// (acquire) and reads. Two slots per source, by the parity of the call's sequence number, so a
// fast peer may deliver call k+1 while this rank still reads call k (it cannot deliver k+2
// before this rank has finished k: it needs this rank's slice of k+1 first).
//
// The region is one block of memory (plain host memory, or pinned host memory that a GPU reads in
// place: Region), laid out as slots[2][world] of `capacity` bytes, then flags[2][world] (u64),
// then sizes[2][world] (u32), then a 256-byte abort note per source rank; everything 64-byte aligned. A wire
// (socket_wire.h, verbs_wire.h) writes slots directly, then calls Publish.
// Thread-safety: Publish, Break and the waits may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace spark::comm::oneshot {

using Clock = std::chrono::steady_clock;

// A block of memory and how to give it back.
struct Region {
  void* data = nullptr;
  size_t bytes = 0;
  std::function<void(void*)> release;
};
// Zeroed, 4096-byte aligned host memory. ResourceExhausted when it cannot be had.
Result<Region> HostRegion(size_t bytes);

class Mailbox {
 public:
  static constexpr size_t kAbortNoteBytes = 256;
  // Bytes of the region for `world` ranks and `capacity` bytes per slot (rounded up to 64).
  static size_t RegionBytes(int world, size_t capacity);

  // `region` must hold RegionBytes(world, capacity) zeroed bytes.
  Mailbox(Region region, int world, size_t capacity);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  int world() const { return world_; }
  size_t capacity() const { return capacity_; }
  void* base() const { return region_.data; }
  size_t slots_bytes() const { return 2 * world_ * capacity_; }

  static int Parity(uint64_t seq) { return static_cast<int>(seq & 1); }
  uint8_t* Slot(int parity, int source) const;
  size_t SlotOffset(int parity, int source) const { return (parity * world_ + source) * capacity_; }
  uint64_t* Flags() const { return flags_; }  // [2][world]
  uint32_t* Sizes() const { return sizes_; }  // [2][world]
  // Where rank `source` leaves its abort note (kAbortNoteBytes; the RDMA wire's notes).
  char* AbortNote(int source) const { return abort_note_ + source * kAbortNoteBytes; }

  // The slot of (seq, source) holds `bytes` bytes of call `seq`: stores the size, then the flag
  // (release), and wakes waiters.
  void Publish(int source, uint64_t seq, uint32_t bytes);
  // The flag of (parity of seq, source) (acquire).
  uint64_t Flag(int source, uint64_t seq) const;
  uint32_t Size(int source, uint64_t seq) const { return sizes_[Parity(seq) * world_ + source]; }

  // Waits until the slot of `source` holds call `seq`: spins for `spin` first, then sleeps.
  // DeadlineExceeded at the deadline (the message is the caller's to write), the break
  // reason once Break was called, Internal when the slot already holds a later call.
  Status Wait(int source, uint64_t seq, Clock::time_point deadline,
              std::chrono::nanoseconds spin);
  // Fails every current and later wait with `reason`. The first reason wins.
  void Break(const Status& reason);
  // The break reason, or Ok.
  Status broken() const;

 private:
  Region region_;
  const int world_;
  const size_t capacity_;
  uint64_t* flags_;
  uint32_t* sizes_;
  char* abort_note_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> is_broken_{false};
  Status broken_;
};

}  // namespace spark::comm::oneshot
