#include "engine/backend/cpu/cpu_deepseek_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace spark::engine::backend::cpu {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float SqrtSoftplus(float x) {
  const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
  return std::sqrt(softplus);
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void Softmax(std::span<float> values) {
  float max = -std::numeric_limits<float>::infinity();
  for (float v : values) max = std::max(max, v);
  if (!std::isfinite(max)) {
    std::fill(values.begin(), values.end(), 0.0f);
    return;
  }
  double sum = 0;
  for (float& v : values) {
    v = std::exp(v - max);
    sum += v;
  }
  for (float& v : values) v = static_cast<float>(v / sum);
}

std::vector<int> TopK(std::span<const float> values, int k) {
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  k = std::min<int>(k, static_cast<int>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  order.resize(k);
  return order;
}

}  // namespace spark::engine::backend::cpu
