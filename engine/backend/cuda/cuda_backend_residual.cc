// CudaBackend's LinearAdd (see Backend::LinearAdd): where the GEMV serves the shapes, the output
// projection adds into the residual stream as it stores each sum (no delta buffer, no add in the
// norm kernel after it). Elsewhere (tensor-core GEMMs) the add is left pending, and the RmsNorm
// of the residual that follows runs AddRmsNorm's one kernel, as the op-by-op layers do. The peer
// all-reduce of tensor-parallel layers waits the same way for the AddRmsNorm of its sum.
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/elementwise.h"
#include "kernels/gemv.h"

namespace spark::engine::backend::cuda {

bool CudaBackend::ByGemv(int64_t rows, int n, int k, DType dtype) {
  if (dtype == DType::kFP8) return UseFp8Gemv(rows, n, k);
  return dtype == DType::kBF16 && rows <= kernels::kGemvMaxRows && k % 8 == 0;
}

void CudaBackend::RunPendingAdd() {
  const PendingAdd add = std::exchange(pending_add_, {});
  if (add.h == nullptr) return;
  ForgetBf16CopyIfWritten(add.h, add.count);
  if (launching()) Record(kernels::Add<float>(add.h, add.delta, add.count, stream_));
}

void CudaBackend::DeferPeerAllReduce(const kernels::PeerAllReduceArgs* args, float* data,
                                     size_t count) {
  Activate();  // whatever is pending comes first
  pending_reduce_ = {args, data, count};
}

void CudaBackend::RunPendingReduce() {
  const PendingReduce reduce = std::exchange(pending_reduce_, {});
  if (reduce.args == nullptr) return;
  ForgetBf16CopyIfWritten(reduce.data, reduce.count);
  if (launching())
    Record(kernels::PeerAllReduceSum(*reduce.args, reduce.data, reduce.count, stream_));
}

CudaBackend::PendingAdd CudaBackend::TakePendingAdd(const float* h, size_t count) {
  if (pending_add_.h != h || pending_add_.count != count) return {};  // Activate runs it
  return std::exchange(pending_add_, {});
}

void CudaBackend::LinearAdd(const float* x, int64_t rows, int in_features, WeightRef w,
                            int out_features, float* scratch, float* h) {
  if (!ByGemv(rows, out_features, in_features, w.dtype)) {
    Linear(x, rows, in_features, w, out_features, scratch);
    pending_add_ = {h, scratch, static_cast<size_t>(rows) * out_features};
    return;
  }
  Activate();
  if (!launching()) return;
  kernels::GemvSegments segs;
  segs.count = 1;
  segs.w[0] = w.data;
  segs.out[0] = h;
  segs.n[0] = out_features;
  segs.accumulate = true;
  if (w.dtype == DType::kFP8) {
    segs.scales[0] = Fp8Scales(w.data, static_cast<size_t>(out_features) * in_features);
    Record(kernels::GemvFp8Many(x, rows, in_features, segs, stream_));
  } else {
    Record(kernels::GemvBf16Many(x, rows, in_features, segs, stream_));
  }
}

}  // namespace spark::engine::backend::cuda
