#include "engine/backend/cuda/device_memory.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {
namespace {

constexpr size_t kArenaChunk = 64 << 20;

}  // namespace

DeviceMemory::~DeviceMemory() {
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
  if (staging_device_ != nullptr) cudaFree(staging_device_);
  for (auto& [chunk, bytes] : arena_) cudaFree(chunk);
}

Status DeviceMemory::Init(size_t staging_bytes) {
  staging_bytes_ = staging_bytes;
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&staging_host_, 2 * staging_bytes_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging_device_, staging_bytes_));
  return Status::Ok();
}

Result<Buffer> DeviceMemory::AllocatorBuffer(size_t bytes, size_t count, DType dtype) {
  SPARK_ASSIGN_OR_RETURN(void* p, allocator_.Allocate(bytes));
  DeviceAllocator* allocator = &allocator_;
  return Buffer(p, count, dtype, [allocator](float* f) { allocator->Free(f); });
}

Result<void*> DeviceMemory::ArenaAllocate(size_t bytes, bool may_grow) {
  const size_t need = Align(bytes);
  while (arena_chunk_ < arena_.size() && arena_used_ + need > arena_[arena_chunk_].second) {
    ++arena_chunk_;
    arena_used_ = 0;
  }
  if (arena_chunk_ == arena_.size()) {
    if (!may_grow) {
      return InternalError(
          "cuda backend: a graph replay asked for more workspace than its capture did");
    }
    char* chunk = nullptr;
    const size_t chunk_bytes = std::max(need, kArenaChunk);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&chunk, chunk_bytes));
    arena_.push_back({chunk, chunk_bytes});
    arena_used_ = 0;
  }
  void* p = arena_[arena_chunk_].first + arena_used_;
  arena_used_ += need;
  return p;
}

const void* DeviceMemory::FindStaged(const void* host, size_t bytes, int area) const {
  const char* area_host = staging_host_ + area * staging_bytes_;
  for (const Staged& st : staged_) {
    if (st.host == host && st.bytes == bytes &&
        (bytes == 0 || std::memcmp(area_host + st.offset, host, bytes) == 0)) {
      return staging_device_ + st.offset;
    }
  }
  return nullptr;
}

Result<void*> DeviceMemory::Stage(const void* host, size_t bytes, int area, bool copy, bool shared,
                                  cudaStream_t stream) {
  const size_t offset = staging_used_;
  char* h = staging_host_ + area * staging_bytes_ + offset;
  char* d = staging_device_ + offset;
  staging_used_ += Align(bytes);
  if (bytes > 0) {
    std::memcpy(h, host, bytes);
    if (copy) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream));
    }
  }
  if (shared) staged_.push_back({host, bytes, offset});
  return d;
}

void DeviceMemory::ResetStaging() {
  staging_used_ = 0;
  staged_.clear();
}

Status DeviceMemory::GrowStaging(size_t bytes) {
  ResetStaging();
  cudaFreeHost(staging_host_);
  cudaFree(staging_device_);
  staging_host_ = staging_device_ = nullptr;
  staging_bytes_ = std::max(Align(bytes), 2 * staging_bytes_);
  return Init(staging_bytes_);
}

}  // namespace spark::engine::backend::cuda
