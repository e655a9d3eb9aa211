#include "engine/backend/cuda/device_allocator.h"

#include <cuda_runtime.h>

#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {

DeviceAllocator::~DeviceAllocator() {
  for (auto& [size, p] : free_) cudaFree(p);
  for (auto& [p, size] : in_use_) cudaFree(p);
}

// Powers of two up to 1 MiB, then whole 2 MiB pages: at most 2x waste on small blocks, little
// on large ones (weights and KV caches, allocated once).
size_t DeviceAllocator::SizeClass(size_t bytes) {
  if (bytes <= 256) return 256;
  if (bytes <= (1u << 20)) {
    size_t c = 256;
    while (c < bytes) c <<= 1;
    return c;
  }
  const size_t page = 2u << 20;
  return (bytes + page - 1) / page * page;
}

Result<void*> DeviceAllocator::Allocate(size_t bytes) {
  const size_t size = SizeClass(bytes);
  auto it = free_.find(size);
  if (it != free_.end()) {
    void* p = it->second;
    free_.erase(it);
    cached_ -= size;
    in_use_[p] = size;
    return p;
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation && !free_.empty()) {
    cudaGetLastError();
    for (auto& [s, q] : free_) {
      cudaFree(q);
      held_ -= s;
    }
    free_.clear();
    cached_ = 0;
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError("cuda backend: cannot allocate " + std::to_string(size) +
                                  " bytes of device memory (" + std::to_string(held_) +
                                  " held); use a smaller model, fewer KV blocks or more ranks");
  }
  held_ += size;
  in_use_[p] = size;
  return p;
}

void DeviceAllocator::Free(void* p) {
  auto it = in_use_.find(p);
  if (it == in_use_.end()) return;
  free_.emplace(it->second, p);
  cached_ += it->second;
  in_use_.erase(it);
}

}  // namespace spark::engine::backend::cuda
