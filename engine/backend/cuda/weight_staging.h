// WeightStaging: checkpoint bytes into device memory at the host's memory speed. Several threads
// read the file at once (pread where the file is given: no page faults on the mapping, and
// parallel requests to a cold disk) into one of a few pinned staging buffers, and each buffer's
// host-to-device copy runs on the stream while the threads fill the next; the host waits only
// when it comes back to a buffer still in flight. bf16 bytes bound for fp32 weights land in a
// device buffer of the slot first and are widened there (kernels::CastBf16ToF32). Pinned and
// device staging memory is taken on first use and kept until the staging dies: freeing it
// (cudaFreeHost, cudaFree) waits for the whole device, which deadlocks when another rank on the
// same GPU spins in a peer all-reduce waiting for this one.
// Thread-safety: one caller at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/backend/backend.h"

namespace spark::engine::backend::cuda {

class WeightStaging {
 public:
  static constexpr size_t kBufferBytes = size_t{32} << 20;
  static constexpr int kBuffers = 3;

  // threads <= 0: min(8, hardware threads).
  explicit WeightStaging(int threads = 0);
  ~WeightStaging();
  WeightStaging(const WeightStaging&) = delete;
  WeightStaging& operator=(const WeightStaging&) = delete;

  // Copies `src`, packed, to device memory at `dst` on `stream`; returns once the bytes are in
  // staging (the source may go). Errors are CUDA's (Internal, ResourceExhausted for pinned memory).
  Status Copy(const Backend::WeightBytes& src, uint8_t* dst, cudaStream_t stream);
  // Waits for the copies in flight (on `stream` only; the buffers stay).
  Status Finish(cudaStream_t stream);

 private:
  struct Slot {
    uint8_t* host = nullptr;
    void* device = nullptr;  // for widening, on first use
    cudaEvent_t done = nullptr;
    bool in_flight = false;
  };
  Status Allocate();
  // Packed bytes [begin, begin + n) of `src` into `out`, split over the pool. DataLoss when a
  // pread comes back short.
  Status Gather(const Backend::WeightBytes& src, size_t begin, size_t n, uint8_t* out);
  void Release();

  ThreadPool pool_;
  std::vector<Slot> slots_;
  int next_ = 0;
};

}  // namespace spark::engine::backend::cuda
