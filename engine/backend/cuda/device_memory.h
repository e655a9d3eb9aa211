// DeviceMemory: the memory one CudaBackend works in, of three kinds.
//   - Buffers from a caching allocator (device_allocator.h): weights, KV caches and the
//     workspace of eager steps.
//   - The graph arena: the workspace of graph steps, bump-allocated from chunks that live as
//     long as the backend, so a step replays with the addresses it was captured with.
//   - Staging: the small host inputs of a step (token ids, positions, slots, block tables),
//     written to a pinned host area and copied to one device area; a span passed by several
//     ops of a step (every layer passes the positions) is staged once. Two host areas, so that
//     a graph step may stage while the step before it still copies its inputs from the other.
// The policy (when to wait for the stream, what a full area means inside a graph step) is the
// backend's; this class keeps the bookkeeping.
// Thread-safety: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend_types.h"
#include "engine/backend/cuda/device_allocator.h"

namespace spark::engine::backend::cuda {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Allocates the staging areas (`staging_bytes` each). Internal on CUDA errors.
  Status Init(size_t staging_bytes);

  // A buffer of `bytes` (as `count` elements of `dtype`) from the allocator, returned to it when
  // the Buffer dies. ResourceExhausted when the device is full.
  Result<Buffer> AllocatorBuffer(size_t bytes, size_t count, DType dtype);
  size_t bytes_in_use() const { return allocator_.bytes_in_use(); }

  // Graph arena. `may_grow`: a capture may add chunks; a replay must find its bytes where the
  // capture did (Internal otherwise).
  Result<void*> ArenaAllocate(size_t bytes, bool may_grow);
  void RewindArena() { arena_chunk_ = arena_used_ = 0; }
  // Where the arena stands (chunk, bytes into it): a replay must end where its capture did.
  std::pair<size_t, size_t> arena_mark() const { return {arena_chunk_, arena_used_}; }

  // Staging. Fits: whether `bytes` more fit the areas as they are now.
  bool StagingFits(size_t bytes) const { return staging_used_ + Align(bytes) <= staging_bytes_; }
  size_t staging_bytes() const { return staging_bytes_; }
  size_t staging_used() const { return staging_used_; }
  // The copy of `bytes` at `host` staged in this step through host area `area`, if there is one
  // (same address, size and contents).
  const void* FindStaged(const void* host, size_t bytes, int area) const;
  // Writes `bytes` at `host` into host area `area` and, when `copy`, enqueues their copy to the
  // device area on `stream`; returns the device address. The caller checked StagingFits.
  // `shared`: remembered for FindStaged.
  Result<void*> Stage(const void* host, size_t bytes, int area, bool copy, bool shared,
                      cudaStream_t stream);
  // Forgets this step's staged spans (the areas are free again).
  void ResetStaging();
  // Replaces the areas with ones of at least `bytes` (every copy that reads them must be done:
  // the caller waited, and dropped the graphs that copy from the old ones).
  Status GrowStaging(size_t bytes);

  static size_t Align(size_t bytes) { return (std::max<size_t>(bytes, 1) + 255) / 256 * 256; }

 private:
  DeviceAllocator allocator_;
  std::vector<std::pair<char*, size_t>> arena_;  // chunks
  size_t arena_chunk_ = 0, arena_used_ = 0;
  char* staging_host_ = nullptr;  // pinned, two areas of staging_bytes_
  char* staging_device_ = nullptr;
  size_t staging_bytes_ = 0, staging_used_ = 0;
  struct Staged {
    const void* host;
    size_t bytes;
    size_t offset;
  };
  std::vector<Staged> staged_;  // this step's shared spans
};

}  // namespace spark::engine::backend::cuda
