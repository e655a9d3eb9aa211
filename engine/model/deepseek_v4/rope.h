// DeepSeek-V4 rotary embeddings: interleaved pairs (2i, 2i+1) on the trailing rope_dim channels
// of a vector ([nope | rope]), with two frequency tables — "main" (plain RoPE, sliding-only
// layers) and "compress" (compress_rope_theta with YaRN, for CSA/HCA layers, their compressors
// and the indexer). The inverse rotation (sin negated) undoes RoPE on attention outputs.
// Thread-safety: read-only after construction.
#pragma once

#include <vector>

#include "engine/core/model_config.h"

namespace spark::engine::model::dsv4 {

class RopeTable {
 public:
  // Plain RoPE: inv_freq[i] = theta^(-2i / rope_dim).
  RopeTable(double theta, int rope_dim);
  // With YaRN (transformers' _compute_yarn_parameters, truncated correction range) when
  // yarn.enabled; cos and sin are scaled by yarn.attention_factor.
  RopeTable(double theta, int rope_dim, const core::YarnSettings& yarn);

  int rope_dim() const { return rope_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

  // Rotates the trailing rope_dim channels of x[0, dim) for `position`; `inverse` negates sin.
  void Apply(float* x, int dim, int position, bool inverse = false) const;

 private:
  int rope_dim_;
  float scale_ = 1.0f;
  std::vector<float> inv_freq_;
};

}  // namespace spark::engine::model::dsv4
