// NcclCommunicator: Communicator over NCCL for one GPU per rank (the CUDA backend's tensor
// parallelism and `sparkctl bench allreduce` on GPUs). Compiled only when the build has CUDA
// (SPARK_WITH_CUDA); every pointer it takes is device memory on device().
//
// Creation goes through the engine's Rendezvous: rank 0 makes the ncclUniqueId and sets it in
// the store under "<session>/nccl-id"; the others read it from there; then ncclCommInitRank.
// Each communicator owns a non-blocking CUDA stream. The Communicator methods enqueue and then
// wait (they return when this rank's part is done); the Enqueue* methods only enqueue, so a
// caller can issue many collectives and Synchronize() once (what the benchmark times).
// Errors name host, rank and file:line ("gpu-1 rank 1: nccl_communicator.cc:88: ncclAllReduce:
// unhandled system error"); Synchronize gives DeadlineExceeded after the timeout and aborts the
// NCCL communicator rather than hang.
// Thread-safety: one thread at a time per communicator.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "comm/communicator.h"
#include "comm/rendezvous.h"

struct CUstream_st;
struct ncclComm;

namespace spark::comm {

class NcclCommunicator : public Communicator {
 public:
  // Uses rendezvous.rank()/world_size() and CUDA device `device` (made current on this thread).
  // Returns FailedPrecondition (no such device), DeadlineExceeded (rank 0's id never arrived),
  // Internal (CUDA or NCCL errors, with host, rank, file:line).
  static Result<std::unique_ptr<NcclCommunicator>> Create(
      Rendezvous& rendezvous, int device, const std::string& session = "nccl",
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int device() const { return device_; }
  CUstream_st* stream() const { return stream_; }

  // Communicator: device pointers; each returns after Synchronize().
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;

  // Enqueue on stream() without waiting. send may equal recv (all-reduce in place) or
  // recv + rank * count (all-gather in place).
  Status EnqueueAllReduceSum(const float* send, float* recv, size_t count);
  Status EnqueueAllGather(const float* send, float* recv, size_t count);
  // The same on a caller's stream of this device (a CUDA backend's stream, also while it
  // captures a graph); the caller waits for that stream itself.
  Status EnqueueAllReduceSum(const float* send, float* recv, size_t count, CUstream_st* stream);
  Status EnqueueAllGather(const float* send, float* recv, size_t count, CUstream_st* stream);
  // Waits for everything enqueued. DeadlineExceeded after the timeout (the communicator is
  // aborted and unusable afterwards); Internal for an asynchronous NCCL error.
  Status Synchronize();

  // NCCL_VERSION_CODE this file was compiled against and the loaded library's version.
  static int HeaderVersion();
  static int LibraryVersion();

 private:
  NcclCommunicator(int rank, int world_size, int device, std::chrono::milliseconds timeout);
  Status Connect(Rendezvous& rendezvous, const std::string& session);
  std::string Where() const;  // "host rank R"

  const int rank_;
  const int world_size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  bool aborted_ = false;
};

}  // namespace spark::comm
