#include "engine/backend/cuda/stream_ordered_communicator.h"

#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {
namespace {

// Device scratch of `bytes`, filled from host memory when `from` is set.
Result<Buffer> ToDevice(CudaBackend& backend, const void* from, size_t bytes) {
  SPARK_ASSIGN_OR_RETURN(Buffer b, backend.Allocate((bytes + sizeof(float) - 1) / sizeof(float)));
  if (from != nullptr) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.data(), from, bytes, cudaMemcpyHostToDevice));
  }
  return b;
}

// NCCL collectives captured into a CUDA graph stopped every rank at the same replay (the 10th)
// on 2 x H200 with NCCL 2.28.9, with and without NCCL_GRAPH_MIXING_SUPPORT; until that is
// understood, only the peer all-reduce runs inside graph steps.
Status GraphRefusal() {
  return FailedPreconditionError(
      "NCCL collectives cannot run inside a CUDA graph step (only the peer all-reduce of ranks "
      "on one host can, for device tensors up to its capacity); run this step without graphs");
}

}  // namespace

bool IsHostPointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged;
}

Status StreamOrderedCommunicator::EnablePeerAllReduce(size_t capacity_floats,
                                                      kernels::PeerProtocol protocol) {
  if (world_size() == 1) return UnavailableError("peer all-reduce: one rank");
  SPARK_ASSIGN_OR_RETURN(
      peer_, PeerAllReduce::Create(
                 *this, backend_->device(), capacity_floats,
                 std::chrono::duration_cast<std::chrono::milliseconds>(backend_->step_timeout()),
                 protocol));
  return Status::Ok();
}

bool StreamOrderedCommunicator::PeerFits(const float* data, size_t count) const {
  return peer_ != nullptr && peer_->Fits(data, count) && !IsHostPointer(data);
}

Status StreamOrderedCommunicator::EnableOneShot(const comm::oneshot::OneShotOptions& options,
                                                size_t max_bytes) {
  if (world_size() == 1) return UnavailableError("one-shot: one rank");
  comm::oneshot::OneShotOptions o = options;
  o.capacity_bytes = max_bytes;
  SPARK_ASSIGN_OR_RETURN(oneshot_,
                         comm::oneshot::StagedOneShot::Create(*this, backend_->device(), o));
  oneshot_max_bytes_ = max_bytes;
  return Status::Ok();
}

bool StreamOrderedCommunicator::OneShotFits(const float* data, size_t count) const {
  return oneshot_ != nullptr && count * sizeof(float) <= oneshot_max_bytes_ && !IsHostPointer(data);
}

Status StreamOrderedCommunicator::ThroughHost(const float* in, size_t in_count, float* out,
                                              size_t out_count, bool gather) {
  SPARK_RETURN_IF_ERROR(backend_->Synchronize());
  std::vector<float> host_in(in_count), host_out(gather ? out_count : 0);
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(host_in.data(), in, in_count * sizeof(float), cudaMemcpyDefault));
  if (gather) {
    SPARK_RETURN_IF_ERROR(inner_->AllGather(host_in.data(), in_count, host_out.data()));
  } else {
    SPARK_RETURN_IF_ERROR(inner_->AllReduceSum(host_in.data(), in_count));
  }
  const std::vector<float>& result = gather ? host_out : host_in;
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out, result.data(), out_count * sizeof(float), cudaMemcpyDefault));
  return Status::Ok();
}

Status StreamOrderedCommunicator::AllReduceSum(float* data, size_t count) {
  if (PeerFits(data, count)) {
    // On the backend's stream; in a graph replay's host-only pass it launches nothing, the graph
    // holds the kernel.
    backend_->PeerAllReduceSum(*peer_->args(), data, count);
    return backend_->status();
  }
  if (OneShotFits(data, count)) {
    // On the backend's stream like the peer path; a replay's host-only pass launches nothing.
    backend_->PrepareDirectWork();
    if (!backend_->launching()) return oneshot_->broken();
    return oneshot_->EnqueueAllReduceSum(data, count, backend_->stream());
  }
  if (backend_->in_graph()) return GraphRefusal();
  const bool host = IsHostPointer(data);
  if (nccl_ == nullptr) {
    return host ? inner_->AllReduceSum(data, count) : ThroughHost(data, count, data, count, false);
  }
  if (!host) {
    // Device data: on the backend's stream, after the op that made it, no waiting here; the
    // backend's next Download waits (with its deadline).
    backend_->PrepareDirectWork();
    return nccl_->EnqueueAllReduceSum(data, data, count, backend_->stream());
  }
  SPARK_RETURN_IF_ERROR(backend_->Synchronize());
  SPARK_ASSIGN_OR_RETURN(Buffer d, ToDevice(*backend_, data, count * sizeof(float)));
  SPARK_RETURN_IF_ERROR(nccl_->AllReduceSum(d.data(), count));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(data, d.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status StreamOrderedCommunicator::AllGather(const float* in, size_t count, float* out) {
  const size_t world = static_cast<size_t>(world_size());
  const bool host_in = IsHostPointer(in), host_out = IsHostPointer(out);
  if (!host_in && PeerFits(out, world * count)) {
    // A sum of zeros but for each rank's own slice is the gather (x + 0 == x, exactly).
    backend_->PrepareDirectWork();
    if (backend_->launching()) {
      const size_t bytes = count * sizeof(float);
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, bytes * world, backend_->stream()));
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out + rank() * count, in, bytes,
                                                 cudaMemcpyDeviceToDevice, backend_->stream()));
    }
    backend_->PeerAllReduceSum(*peer_->args(), out, world * count);
    return backend_->status();
  }
  if (!host_in && !host_out && OneShotFits(in, count)) {
    backend_->PrepareDirectWork();
    if (!backend_->launching()) return oneshot_->broken();
    return oneshot_->EnqueueAllGather(in, count, out, backend_->stream());
  }
  if (backend_->in_graph()) return GraphRefusal();
  if (nccl_ == nullptr) {
    if (host_in && host_out) return inner_->AllGather(in, count, out);
    return ThroughHost(in, count, out, world * count, true);
  }
  if (!host_in && !host_out) {
    backend_->PrepareDirectWork();
    return nccl_->EnqueueAllGather(in, out, count, backend_->stream());
  }
  SPARK_RETURN_IF_ERROR(backend_->Synchronize());
  const size_t bytes = count * sizeof(float);
  SPARK_ASSIGN_OR_RETURN(Buffer din, ToDevice(*backend_, host_in ? in : nullptr, bytes));
  if (!host_in) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy(din.data(), in, bytes, cudaMemcpyDeviceToDevice));
  }
  SPARK_ASSIGN_OR_RETURN(Buffer dout, ToDevice(*backend_, nullptr, bytes * world));
  SPARK_RETURN_IF_ERROR(nccl_->AllGather(din.data(), count, dout.data()));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out, dout.data(), bytes * world,
                 host_out ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice));
  return Status::Ok();
}

Status StreamOrderedCommunicator::Broadcast(void* data, size_t bytes, int root) {
  SPARK_RETURN_IF_ERROR(backend_->Synchronize());
  const bool host = IsHostPointer(data);
  if (nccl_ == nullptr) {
    if (host) return inner_->Broadcast(data, bytes, root);
    std::vector<char> staged(bytes);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy(staged.data(), data, bytes, cudaMemcpyDeviceToHost));
    SPARK_RETURN_IF_ERROR(inner_->Broadcast(staged.data(), bytes, root));
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy(data, staged.data(), bytes, cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  if (!host) return nccl_->Broadcast(data, bytes, root);
  SPARK_ASSIGN_OR_RETURN(Buffer d, ToDevice(*backend_, data, bytes));
  SPARK_RETURN_IF_ERROR(nccl_->Broadcast(d.data(), bytes, root));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy(data, d.data(), bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status StreamOrderedCommunicator::Barrier() {
  SPARK_RETURN_IF_ERROR(backend_->Synchronize());
  return inner_->Barrier();
}

}  // namespace spark::engine::backend::cuda
