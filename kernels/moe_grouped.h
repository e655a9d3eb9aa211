// DeepSeek-V4's MoE on the GPU without a host round trip: routing, the per-expert token lists
// and work items that QuantGemm (quant_gemm.h) runs the experts over, and the combine. Counts
// stay on the device, so an MoE layer can be part of a CUDA graph, and each expert's weights
// are read once per step however many tokens chose it.
//
// Assignment a = t * top_k + i is token t's i-th choice. The list positions of local expert e
// are [offset[e], offset[e] + count[e]); position p holds assignment list_assign[p] of token
// list_token[p]. The order inside an expert's list is not fixed, but every assignment's result
// is computed alone (one token column of the products, one row of ys), so the sums do not
// depend on it.
// Thread-safety: stateless; launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"
#include "kernels/quant_gemm.h"

namespace spark::kernels {

// DeepSeek-V4 routing (DeepseekOps::Route): s = sqrt(softplus(logits / temperature)); selection
// from hash_table[token_ids[t]] (float expert ids [vocab, top_k]) when given, else the top_k of
// s + bias (ties to the lower id); weights = s[sel] / (sum of selected s + 1e-20) * scaling.
// ids and weights [rows, top_k] as floats. InvalidArgument past 1024 experts or top_k 32.
struct DeepseekRouteArgs {
  const float* logits = nullptr;  // [rows, experts]
  int64_t rows = 0;
  int experts = 0, top_k = 0;
  const float* bias = nullptr;
  const float* hash_table = nullptr;
  const int32_t* token_ids = nullptr;  // device [rows], read with hash_table
  float scaling = 1.0f, temperature = 1.0f;
  float* ids = nullptr;
  float* weights = nullptr;
};
Status DeepseekRoute(const DeepseekRouteArgs& a, cudaStream_t stream);

// The lists and work items of the local experts [expert_begin, expert_begin + local) from
// ids [assignments] (float expert ids): list_token / list_assign [assignments], work
// [MoeMaxWork(assignments, local, tile)] items of at most `tile` tokens (matrix = local expert),
// *work_count. InvalidArgument past 4096 local experts.
int MoeMaxWork(int64_t assignments, int local, int tile);
struct MoeListArgs {
  const float* ids = nullptr;
  int64_t assignments = 0;
  int top_k = 1;
  int expert_begin = 0, local = 0;
  int tile = 8;
  int32_t* list_token = nullptr;
  int32_t* list_assign = nullptr;
  QuantWork* work = nullptr;
  int32_t* work_count = nullptr;
};
Status MoeBuildLists(const MoeListArgs& a, cudaStream_t stream);

// out[t] = sum over i < top_k of ys[t * top_k + i] for local experts (in i order), plus
// shared[t] when given: [rows, hidden] fp32.
Status MoeCombineAssignments(const float* ys, const float* ids, int64_t rows, int top_k,
                             int expert_begin, int local, int hidden, const float* shared,
                             float* out, cudaStream_t stream);

// The fp32 path of the experts (weights kept in fp32, the reference numerics):
// act[r, i] = silu(min(g, limit)) * clamp(u, -limit, limit) for g = gate_up[r, i] and u =
// gate_up[r, inter + i] (unclamped when limit <= 0);
Status SwiGluClamp(const float* gate_up, int64_t rows, int inter, float limit, float* act,
                   cudaStream_t stream);
// out[i] = x[rows[i]] for `count` rows of `width` floats;
Status GatherRows(const float* x, const int32_t* rows, int64_t count, int width, float* out,
                  cudaStream_t stream);
// out[rows[i]] = x[i] * scales[rows[i]] for `count` rows of `width` floats.
Status ScatterScaledRows(const float* x, const int32_t* rows, const float* scales, int64_t count,
                         int width, float* out, cudaStream_t stream);

}  // namespace spark::kernels
