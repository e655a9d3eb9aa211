// DeepSeek-V4 / V4.1 kernels of the residual streams: manifold-constrained hyper-connections
// (mHC: expand, the mixing weights with their Sinkhorn normalisation, collapse, post) and
// V4.1's Engram gated write (engine/backend/deepseek_op_args.h defines each;
// engine/backend/cpu/cpu_deepseek_hc.cc and cpu_deepseek_v41.cc are the reference). fp32;
// device pointers; streams are [tokens, n, hidden]. InvalidArgument for shapes a kernel does not
// take, Internal for launch failures.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// The widest mHC the kernels take: n * (n + 2) mixing outputs plus a sum of squares must fit
// one warp's 32 lanes (HcMix), and post keeps n values a thread.
constexpr int kMaxHcStreams = 4;

// streams[t, j] = x[t] for j < n.
Status HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams,
                cudaStream_t stream);

// The mixing weights of one site (DeepseekOps::HcMix): post and comb null for the head's
// pre-only form (fn then has n rows, scale one value).
struct HcMixParams {
  const float* streams = nullptr;
  int64_t tokens = 0;
  int n = 0, hidden = 0;
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
  float norm_eps = 1e-6f, hc_eps = 1e-6f;
  int sinkhorn_iters = 1;
  float* pre = nullptr;
  float* post = nullptr;
  float* comb = nullptr;
};
// Floats of scratch HcMix needs (the projection's partial sums).
int64_t HcMixScratchFloats(int64_t tokens, int n, int hidden);
// n <= kMaxHcStreams, n * hidden a multiple of 4 with 16-byte aligned streams and fn.
Status HcMix(const HcMixParams& p, float* scratch, cudaStream_t stream);

// out[t] = sum_j pre[t, j] * streams[t, j].
Status HcCollapse(const float* streams, const float* pre, int64_t tokens, int n, int hidden,
                  float* out, cudaStream_t stream);

// streams[t, k] = post[t, k] * block_out[t] + sum_j comb[t, j * n + k] * streams[t, j], in place.
Status HcPost(float* streams, const float* block_out, const float* post, const float* comb,
              int64_t tokens, int n, int hidden, cudaStream_t stream);

// Engram's gated write (DeepseekOps::EngramGate), in place on streams.
struct EngramGateParams {
  float* streams = nullptr;
  const float* kv = nullptr;      // [tokens, (n + 1) * hidden]
  const float* weight = nullptr;  // [n, hidden]
  int64_t tokens = 0;
  int n = 0, hidden = 0;
  float eps = 1e-20f;
};
Status EngramGate(const EngramGateParams& p, cudaStream_t stream);

}  // namespace spark::kernels
