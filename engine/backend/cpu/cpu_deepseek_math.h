// Scalar helpers of the CPU DeepSeek ops, each as transformers computes it in fp32.
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include "engine/backend/deepseek_op_args.h"

namespace spark::engine::backend::cpu {

float Sigmoid(float x);
// torch's softplus (beta 1, threshold 20), then sqrt: the V4 router score.
float SqrtSoftplus(float x);
float Silu(float x);

// In-place softmax, summed in double; -inf entries get 0, and a row without a finite maximum
// all 0.
void Softmax(std::span<float> values);

// Indices of the `k` largest values (at most values.size()), largest first; ties go to the lower
// index (torch.topk leaves tied order unspecified).
std::vector<int> TopK(std::span<const float> values, int k);

// The field's floats for the token at `slot`.
inline float* FieldAt(const CacheField& f, int64_t slot) {
  return f.base + slot * f.stride + f.offset;
}

}  // namespace spark::engine::backend::cpu
