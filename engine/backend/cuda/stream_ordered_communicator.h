// StreamOrderedCommunicator: puts a device communicator (NCCL) behind a CudaBackend so that the
// model's collectives see finished data and may pass host or device pointers.
//
// The backend enqueues on its own stream and the communicator on its own, so before every
// collective this waits for the backend's stream (CudaBackend::Synchronize). Host pointers
// (the model gathers vocabulary-parallel logits and broadcasts small plans in host memory) are
// copied to device scratch, sent through the inner communicator, and copied back.
// Thread-safety: as the wrapped communicator (one thread at a time).
#pragma once

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/comm/communicator.h"

namespace spark::engine::backend::cuda {

class StreamOrderedCommunicator : public comm::Communicator {
 public:
  // Both must outlive this object; `inner` takes device pointers on backend's device.
  StreamOrderedCommunicator(comm::Communicator* inner, CudaBackend* backend)
      : inner_(inner), backend_(backend) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  // Each returns the backend's first error, a CUDA copy error, or the inner communicator's.
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;

 private:
  comm::Communicator* inner_;
  CudaBackend* backend_;
};

// Whether p points to host memory (pageable or pinned) rather than device memory.
bool IsHostPointer(const void* p);

}  // namespace spark::engine::backend::cuda
