// PeerAllReduce: the tensor-parallel ranks of one host sum small tensors by reading each
// other's GPU memory directly (kernels/peer_all_reduce.h), a few microseconds per call instead
// of NCCL's tens, and — unlike NCCL collectives here — safe inside CUDA graph steps.
//
// Set up collectively: every rank allocates its region, and the ranks exchange where it is
// through a Communicator (CUDA IPC handles between processes; plain pointers with peer access
// between threads of one process). Available only when all ranks run on one host (same host
// name and boot id), every pair of GPUs has peer access and there are at most 8 ranks; every
// rank gets the same answer. Ranks on different machines (DGX Sparks over their ConnectX
// ports) keep NCCL.
// Thread-safety: one thread at a time (the rank's engine thread).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <memory>

#include "base/status.h"
#include "comm/communicator.h"
#include "kernels/peer_all_reduce.h"

namespace spark::engine::backend::cuda {

class PeerAllReduce {
 public:
  // Collective over `comm` (every rank calls it, with the same capacity, a multiple of 4, and
  // protocol: kernels/peer_all_reduce.h). `device` is this rank's CUDA device. Unavailable with
  // the reason when the ranks cannot use it (see above).
  static Result<std::unique_ptr<PeerAllReduce>> Create(
      comm::Communicator& comm, int device, size_t capacity_floats,
      std::chrono::milliseconds timeout,
      kernels::PeerProtocol protocol = kernels::PeerProtocol::kSignal);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  size_t capacity() const { return args_.capacity; }
  // Whether data/count can take this path (device memory is the caller's business).
  bool Fits(const float* data, size_t count) const {
    return count <= args_.capacity && reinterpret_cast<uintptr_t>(data) % 16 == 0;
  }
  // What the kernels take (valid while this object lives).
  const kernels::PeerAllReduceArgs* args() const { return &args_; }

 private:
  PeerAllReduce() = default;

  int device_ = 0;
  kernels::PeerAllReduceArgs args_;
  void* own_region_ = nullptr;
  void* opened_[kernels::kPeerMaxRanks] = {};  // regions opened through IPC (closed at the end)
};

}  // namespace spark::engine::backend::cuda
