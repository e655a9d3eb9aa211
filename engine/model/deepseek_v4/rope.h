// DeepSeek-V4 rotary frequencies: interleaved pairs (2i, 2i+1) on the trailing rope_dim channels
// of a vector ([nope | rope]), with two tables — "main" (plain RoPE, sliding-only layers) and
// "compress" (compress_rope_theta with YaRN, for CSA/HCA layers, their compressors and the
// indexer). Only the frequencies are computed here, from the config on the host; the rotation is
// the backend's op (DeepseekOps::Rope over a backend::RopeTable).
// Thread-safety: read-only after construction.
#pragma once

#include <vector>

#include "engine/core/model_config.h"

namespace spark::engine::model::dsv4 {

class RopeFrequencies {
 public:
  // Plain RoPE: inv_freq[i] = theta^(-2i / rope_dim).
  RopeFrequencies(double theta, int rope_dim);
  // With YaRN (transformers' _compute_yarn_parameters, truncated correction range) when
  // yarn.enabled; cos and sin are scaled by yarn.attention_factor.
  RopeFrequencies(double theta, int rope_dim, const core::YarnSettings& yarn);

  int rope_dim() const { return rope_dim_; }
  float scale() const { return scale_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  int rope_dim_;
  float scale_ = 1.0f;
  std::vector<float> inv_freq_;
};

}  // namespace spark::engine::model::dsv4
