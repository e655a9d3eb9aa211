// Helpers for the backend tests: random inputs and the relative error between two results.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace spark::engine::backend::testing {

// n normal values of standard deviation `scale` from `seed`.
inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ||got - want|| / ||want|| (L2), NaN when got holds a NaN.
inline double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return NAN;
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace spark::engine::backend::testing
