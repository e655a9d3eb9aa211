// Small fp32 host loops the DeepSeek-V4 forward needs beyond the Backend's ops: norms,
// activations, softmax and top-k. Each matches the transformers reference's formula.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spark::engine::model::dsv4 {

// x[r] * rsqrt(mean(x[r]^2) + eps) * weight (weight may be null: unweighted), in place, for
// `rows` rows of `dim`.
void RmsNormRows(float* x, int64_t rows, int dim, const float* weight, float eps);

float Sigmoid(float x);
// torch's softplus (beta 1, threshold 20), then sqrt: the V4 router score.
float SqrtSoftplus(float x);
float Silu(float x);

// In-place softmax of `values`; -inf entries get 0.
void Softmax(std::span<float> values);

// Indices of the `k` largest values, largest first; ties go to the lower index (transformers'
// torch.topk leaves tied order unspecified, which is why the fixtures avoid boundary ties).
std::vector<int> TopK(std::span<const float> values, int k);

}  // namespace spark::engine::model::dsv4
