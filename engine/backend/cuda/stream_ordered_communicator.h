// StreamOrderedCommunicator: puts a communicator behind a CudaBackend so that the model's
// collectives see finished data and may pass host or device pointers.
//
// Over a device communicator (NCCL), collectives of device memory are enqueued on the backend's
// stream, in order after the ops that produced their input, with no host wait (the backend's
// next Download waits, within its step_timeout). Host pointers (the model gathers
// vocabulary-parallel logits and broadcasts small plans in host memory) wait for the backend, go
// through device scratch on the communicator's own stream, and are copied back.
// Over a host communicator (Gloo, or LocalCommunicator for ranks that are threads, such as two
// ranks sharing one GPU in tests), device tensors wait for the backend and go through host
// memory.
// With EnablePeerAllReduce (ranks of one host with peer access, or on one GPU), all-reduces and
// all-gathers of device tensors up to its capacity go through the peer all-reduce instead: a few
// microseconds each, enqueued on the backend's stream, and allowed inside CUDA graph steps, so
// tensor-parallel decode can run in graphs (CudaBackend::AllReduceAddRmsNorm runs the sum and
// the norm after it as one kernel: PeerArgs). Other collectives inside a graph step are refused
// (FailedPrecondition): captured NCCL collectives stopped at a fixed replay on 2 x H200.
// Thread-safety: as the wrapped communicator (one thread at a time).
#pragma once

#include <memory>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/peer_all_reduce_group.h"
#include "comm/communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/oneshot_cuda/staged_group.h"

namespace spark::engine::backend::cuda {

class StreamOrderedCommunicator : public comm::Communicator {
 public:
  // Both must outlive this object; `inner` takes device pointers on backend's device.
  StreamOrderedCommunicator(comm::NcclCommunicator* inner, CudaBackend* backend)
      : inner_(inner), nccl_(inner), backend_(backend) {}
  // `inner` takes host pointers.
  StreamOrderedCommunicator(comm::Communicator* inner, CudaBackend* backend)
      : inner_(inner), backend_(backend) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  // Each returns the backend's first error, a CUDA copy error, or the inner communicator's.
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;
  bool collectives_in_graphs() const override { return peer_ != nullptr || oneshot_ != nullptr; }

  // Collective: sets up the peer all-reduce for tensors of up to capacity_floats floats (a
  // multiple of 4), with `protocol` (kernels/peer_all_reduce.h). Ok when it is on; Unavailable
  // with the reason otherwise (collectives keep using the inner communicator).
  Status EnablePeerAllReduce(size_t capacity_floats = size_t{1} << 18,
                             kernels::PeerProtocol protocol = kernels::PeerProtocol::kSignal);
  // Collective: sets up the one-shot transport for device tensors of up to max_bytes (its
  // options: comm/oneshot/setup.h), over this communicator's host collectives. Ok when on;
  // Unavailable when the ranks cannot pin its memory; the transport's connection errors.
  Status EnableOneShot(const comm::oneshot::OneShotOptions& options, size_t max_bytes);
  // The peer all-reduce's arguments when a sum of data[0, count) takes that path, else null.
  const kernels::PeerAllReduceArgs* PeerArgs(const float* data, size_t count) const {
    return PeerFits(data, count) ? peer_->args() : nullptr;
  }

 private:
  // Whether a device tensor of `count` floats at `data` takes the peer path.
  bool PeerFits(const float* data, size_t count) const;
  // Whether a device tensor of `count` floats at `data` takes the one-shot path.
  bool OneShotFits(const float* data, size_t count) const;

  // Device tensors over a host communicator: downloaded, passed to it, uploaded.
  Status ThroughHost(const float* in, size_t in_count, float* out, size_t out_count, bool gather);

  comm::Communicator* inner_;
  comm::NcclCommunicator* nccl_ = nullptr;  // inner_ when it takes device pointers
  CudaBackend* backend_;
  std::unique_ptr<PeerAllReduce> peer_;
  std::unique_ptr<comm::oneshot::StagedOneShot> oneshot_;
  size_t oneshot_max_bytes_ = 0;
};

// Whether p points to host memory (pageable or pinned) rather than device memory.
bool IsHostPointer(const void* p);

}  // namespace spark::engine::backend::cuda
