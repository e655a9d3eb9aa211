// StagedOneShot: the one-shot transport for tensors in GPU memory. The mailbox lives in pinned
// host memory mapped into the GPU (GB10 has no GPUDirect RDMA: the ConnectX reads and writes
// host memory, and the GB10 GPU reads that memory in place); the staged kernel
// (staged_kernel.h) copies this rank's slice into its slot and rings a doorbell; this object's
// progress thread answers it: puts the slot on the wire (socket or RDMA, comm/oneshot) and
// waits, within the transport's timeout, for every peer's slice, which the wire's threads
// write into the mailbox and flag; the kernel sums the slots in rank order into device memory.
// Because the sequence number lives in device memory and advances in the kernel, the kernel can
// be captured in a CUDA graph and replayed.
// A failure (a peer stalled past the timeout, a dropped link, sizes that differ) breaks the
// transport: the progress thread names the peer (log, broken()), tells the GPU to stop
// waiting (the kernel traps, so the stream's next wait fails), and every later Enqueue returns
// the error.
// Thread-safety: Enqueue* from one thread (the rank's engine thread); the progress thread is
// internal.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <thread>

#include "base/status.h"
#include "comm/communicator.h"
#include "comm/oneshot/setup.h"
#include "comm/oneshot/transport.h"
#include "comm/oneshot_cuda/staged_kernel.h"

namespace spark::comm::oneshot {

class StagedOneShot {
 public:
  // Collective over `exchange` (host pointers; every rank calls it with the same options).
  // `device` is this rank's CUDA device. The options' region is replaced by pinned host memory.
  // Unavailable when a rank cannot allocate pinned memory (every rank then returns it),
  // otherwise ConnectTransport's errors.
  static Result<std::unique_ptr<StagedOneShot>> Create(Communicator& exchange, int device,
                                                       OneShotOptions options);
  ~StagedOneShot();
  StagedOneShot(const StagedOneShot&) = delete;
  StagedOneShot& operator=(const StagedOneShot&) = delete;

  size_t capacity() const { return args_.slot_bytes; }
  bool Fits(size_t bytes) const { return bytes <= args_.slot_bytes; }
  // Ok, or the error that broke the transport.
  Status broken() const;

  // On `stream`, after the work before it; no host wait. A broken transport's error.
  Status EnqueueAllReduceSum(float* data, size_t count, cudaStream_t stream);
  Status EnqueueAllGather(const float* in, size_t count, float* out, cudaStream_t stream);

  const StagedArgs& args() const { return args_; }
  Transport& transport() { return *transport_; }

 private:
  StagedOneShot() = default;
  void Progress();
  void Abort();

  int device_ = 0;
  StagedArgs args_;
  StagedControl* control_ = nullptr;  // host address of the control block
  StagedState* state_ = nullptr;      // device memory
  std::unique_ptr<Transport> transport_;
  std::thread progress_;
  std::atomic<bool> stop_{false};
};

}  // namespace spark::comm::oneshot
