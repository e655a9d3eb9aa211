// CudaBackend's fused collective: AllReduceAddRmsNorm over the peer all-reduce of ranks on one
// host (StreamOrderedCommunicator) in one kernel, and the plain peer sum it enqueues for the
// communicator's other all-reduces.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "engine/backend/cuda/stream_ordered_communicator.h"
#include "kernels/peer_all_reduce.h"

namespace spark::engine::backend::cuda {

using internal::Bf16;

Status CudaBackend::AllReduceAddRmsNorm(comm::Communicator* comm, float* h, float* delta,
                                        const float* weight, int64_t rows, int dim, float eps,
                                        Output out) {
  const auto* ordered = dynamic_cast<const StreamOrderedCommunicator*>(comm);
  const kernels::PeerAllReduceArgs* args =
      ordered == nullptr ? nullptr : ordered->PeerArgs(delta, static_cast<size_t>(rows) * dim);
  if (!options_.fuse_all_reduce_norm || args == nullptr ||
      !kernels::PeerAddRmsNormFits(*args, delta, rows, dim, h, weight, out.data, Bf16(out))) {
    return Backend::AllReduceAddRmsNorm(comm, h, delta, weight, rows, dim, eps, out);
  }
  Activate();
  ++fused_reduce_norms_;
  if (launching()) {
    Record(kernels::PeerAllReduceAddRmsNorm(*args, delta, rows, dim, h, weight, eps, out.data,
                                            Bf16(out), stream_));
  }
  return status_;
}

void CudaBackend::PeerAllReduceSum(const kernels::PeerAllReduceArgs& args, float* data,
                                   size_t count) {
  Activate();
  if (launching()) Record(kernels::PeerAllReduceSum(args, data, count, stream_));
}

}  // namespace spark::engine::backend::cuda
