// CudaDeepseekOps: manifold-constrained hyper-connections (kernels/deepseek_hc.h).
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "kernels/deepseek_hc.h"

namespace spark::engine::backend::cuda {

void CudaDeepseekOps::HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams) {
  b_.Activate();
  if (!b_.launching()) return;
  b_.Record(kernels::HcExpand(x, tokens, n, hidden, streams, b_.stream_));
}

void CudaDeepseekOps::HcMix(const HcMixArgs& a) {
  b_.Activate();
  Status s = [&]() -> Status {
    if (a.tokens <= 0) return Status::Ok();
    const int64_t floats = kernels::HcMixScratchFloats(a.tokens, a.n, a.hidden);
    SPARK_ASSIGN_OR_RETURN(Buffer scratch, b_.Scratch(floats * sizeof(float)));
    if (!b_.launching()) return Status::Ok();
    const kernels::HcMixParams p{a.streams, a.tokens, a.n,        a.hidden, a.fn,
                                 a.base,    a.scale,  a.norm_eps, a.hc_eps, a.sinkhorn_iters,
                                 a.pre,     a.post,   a.comb};
    return kernels::HcMix(p, scratch.data(), b_.stream_);
  }();
  b_.Record(s);
}

void CudaDeepseekOps::HcCollapse(const float* streams, const float* pre, int64_t tokens, int n,
                                 int hidden, float* out) {
  b_.Activate();
  if (!b_.launching()) return;
  b_.Record(kernels::HcCollapse(streams, pre, tokens, n, hidden, out, b_.stream_));
}

void CudaDeepseekOps::HcPost(float* streams, const float* block_out, const float* post,
                             const float* comb, int64_t tokens, int n, int hidden) {
  b_.Activate();
  if (!b_.launching()) return;
  b_.Record(kernels::HcPost(streams, block_out, post, comb, tokens, n, hidden, b_.stream_));
}

}  // namespace spark::engine::backend::cuda
