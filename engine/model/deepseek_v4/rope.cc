#include "engine/model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace spark::engine::model::dsv4 {

RopeFrequencies::RopeFrequencies(double theta, int rope_dim) : rope_dim_(rope_dim) {
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float base_pow = static_cast<float>(std::pow(theta, 2.0 * i / rope_dim));
    inv_freq_.push_back(1.0f / base_pow);
  }
}

RopeFrequencies::RopeFrequencies(double theta, int rope_dim, const core::YarnSettings& yarn)
    : RopeFrequencies(theta, rope_dim) {
  if (!yarn.enabled) return;
  scale_ = static_cast<float>(yarn.attention_factor);
  // Dimension at which a wavelength completes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return rope_dim *
           std::log(yarn.original_max_position_embeddings / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(yarn.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(yarn.beta_slow)), rope_dim - 1.0);
  if (low == high) high += 0.001;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float inv = inv_freq_[i];
    const float interpolated = inv / static_cast<float>(yarn.factor);
    inv_freq_[i] = interpolated * (1.0f - extrapolation) + inv * extrapolation;
  }
}

}  // namespace spark::engine::model::dsv4
