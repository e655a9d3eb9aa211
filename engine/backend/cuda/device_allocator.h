// DeviceAllocator: a caching allocator of device memory for one stream. Freed blocks go back to
// a free list keyed by their rounded size and are reused by later allocations of that size
// class, so the per-forward workspace of a decode step costs no cudaMalloc/cudaFree after the
// first step. Reuse is safe because all work runs in one stream, in order.
// Memory returns to the driver only when the allocator is destroyed.
// Thread-safety: not thread-safe; owned by one CudaBackend.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

#include "base/status.h"

namespace spark::engine::backend::cuda {

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // At least `bytes` bytes, 256-byte aligned. ResourceExhausted naming the size and what is
  // already held when the device has no more.
  Result<void*> Allocate(size_t bytes);
  // Returns a block from Allocate to the free list.
  void Free(void* p);

  size_t bytes_held() const { return held_; }  // cached plus in use
  size_t bytes_in_use() const { return held_ - cached_; }  // size classes of live blocks

 private:
  static size_t SizeClass(size_t bytes);
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> in_use_;
  size_t held_ = 0;
  size_t cached_ = 0;  // in free_
};

}  // namespace spark::engine::backend::cuda
