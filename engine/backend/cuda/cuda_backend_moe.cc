// CudaBackend's MoE: route on the GPU, gather each local expert's rows contiguously, read the
// per-expert counts back (one small synchronisation, which is why MoE steps cannot be graph
// steps), run each expert that got rows through the Linear path, combine.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "kernels/activation.h"
#include "kernels/cuda_check.h"
#include "kernels/moe.h"

namespace spark::engine::backend::cuda {

using internal::kMaxLocalExperts;

void CudaBackend::Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
                      const MoeExperts& experts, float* out) {
  Activate();
  if (in_graph()) {
    Record(FailedPreconditionError("cuda backend: MoE layers do not run inside a graph step"));
    return;
  }
  Record(MoeImpl(x, rows, hidden, router_logits, experts, out));
}

// Route on the GPU, gather each local expert's rows contiguously, read the per-expert counts
// back (one small synchronisation), run two GEMMs per expert that got rows, combine.
Status CudaBackend::MoeImpl(const float* x, int64_t rows, int hidden, const float* router_logits,
                            const MoeExperts& experts, float* out) {
  const int k = experts.top_k, inter = experts.intermediate;
  const int local = static_cast<int>(experts.gate_up.size());
  if (local > static_cast<int>(kMaxLocalExperts)) {
    return InvalidArgumentError("cuda backend: more than 4096 local experts");
  }
  const int64_t entries = rows * k;
  kernels::RouterOptions ro;
  ro.num_experts = experts.num_experts;
  ro.top_k = k;
  ro.norm_topk_prob = experts.norm_topk_prob;
  // int32 scratch: ids, position, counts, offsets, cursor; float: weights.
  SPARK_ASSIGN_OR_RETURN(Buffer ints, Scratch((2 * entries + 3 * local + 1) * sizeof(int32_t)));
  SPARK_ASSIGN_OR_RETURN(Buffer weights, Allocate(entries));
  auto* ids = reinterpret_cast<int32_t*>(ints.data());
  int32_t* position = ids + entries;
  int32_t* counts = position + entries;
  int32_t* offsets = counts + local;
  int32_t* cursor = offsets + local + 1;
  SPARK_RETURN_IF_ERROR(kernels::RouteTopK(router_logits, rows, ro, ids, weights.data(), stream_));
  SPARK_ASSIGN_OR_RETURN(Buffer xs, Allocate(std::max<int64_t>(1, entries) * hidden));
  SPARK_RETURN_IF_ERROR(kernels::MoeDispatch<float>(x, rows, hidden, ids, k, experts.expert_begin,
                                                    local, counts, offsets, cursor, position,
                                                    xs.data(), stream_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counts_host_, counts, local * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  int64_t total = 0;
  for (int e = 0; e < local; ++e) total += counts_host_[e];
  SPARK_ASSIGN_OR_RETURN(Buffer gate_up, Allocate(std::max<int64_t>(1, total) * 2 * inter));
  SPARK_ASSIGN_OR_RETURN(Buffer act, Allocate(std::max<int64_t>(1, total) * inter));
  SPARK_ASSIGN_OR_RETURN(Buffer ys, Allocate(std::max<int64_t>(1, total) * hidden));
  // Each expert's rows through LinearImpl: fp32, bf16 or fp8 weights alike.
  int64_t offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(LinearImpl(xs.data() + offset * hidden, n, hidden, experts.gate_up[e],
                                       2 * inter, gate_up.data() + offset * 2 * inter));
    }
    offset += n;
  }
  SPARK_RETURN_IF_ERROR(kernels::SiluMul<float>(gate_up.data(), total, inter, act.data(), stream_));
  offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(LinearImpl(act.data() + offset * inter, n, inter, experts.down[e],
                                       hidden, ys.data() + offset * hidden));
    }
    offset += n;
  }
  return kernels::MoeCombine<float>(ys.data(), position, weights.data(), rows, k, hidden, out,
                                    stream_);
}

}  // namespace spark::engine::backend::cuda
