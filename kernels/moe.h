// Mixture-of-experts kernels: routing (scores, optional grouped selection, top-k, weights) and
// the dispatch/combine around the expert GEMMs. The GEMMs themselves go through Gemm (gemm.h),
// one call per expert that received rows, over rows gathered contiguously per expert.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

struct RouterOptions {
  enum class Scoring { kSoftmax, kSigmoid, kSqrtSoftplus };
  Scoring scoring =
      Scoring::kSoftmax;               // Qwen3-MoE: softmax; DeepSeek-V3: sigmoid; V4: sqrtsoftplus
  int num_experts = 0;                 // at most 1024
  int top_k = 0;                       // at most 32
  bool norm_topk_prob = false;         // renormalise the chosen weights to sum to 1
  float routed_scaling_factor = 1.0f;  // multiplies the final weights
  // Grouped top-k (DeepSeek): experts in n_group equal groups; a group's score is the sum of its
  // two best selection scores; only experts of the topk_group best groups are eligible.
  int n_group = 1;
  int topk_group = 1;
  // Added to the scores for selection only (DeepSeek's e_score_correction_bias); may be null.
  const float* selection_bias = nullptr;
};

// For each row of logits [rows, num_experts]: ids[row, k] of the chosen experts (best first; ties
// to the lower id) and their weights. InvalidArgument for out-of-range options.
Status RouteTopK(const float* logits, int64_t rows, const RouterOptions& options, int32_t* ids,
                 float* weights, cudaStream_t stream);

// Dispatch for the experts [expert_begin, expert_begin + num_local) held here. From ids
// [rows * top_k]: counts[num_local] (entries per local expert), offsets[num_local + 1] (their
// exclusive prefix sums: expert e's rows are [offsets[e], offsets[e + 1]) of the gathered
// buffer), position[rows * top_k] (where entry i went, -1 for experts held elsewhere) and
// gathered x rows xs[offsets[num_local], hidden]. `cursor` is num_local ints of scratch.
template <typename T>
Status MoeDispatch(const T* x, int64_t rows, int hidden, const int32_t* ids, int top_k,
                   int expert_begin, int num_local, int32_t* counts, int32_t* offsets,
                   int32_t* cursor, int32_t* position, T* xs, cudaStream_t stream);

// out[row] = sum over k with position >= 0 of weights[row, k] * ys[position[row, k]] (a fixed
// order, so the result does not depend on scheduling).
template <typename T>
Status MoeCombine(const T* ys, const int32_t* position, const float* weights, int64_t rows,
                  int top_k, int hidden, T* out, cudaStream_t stream);

}  // namespace spark::kernels
