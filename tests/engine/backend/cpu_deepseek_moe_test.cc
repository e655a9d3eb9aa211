// CpuDeepseekOps' MoE routing and clamped SwiGLU experts against naive references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "tests/engine/backend/deepseek_test_util.h"

namespace spark::engine::backend::cpu {
namespace {

using testing::ExpectClose;
using testing::Random;

constexpr int kExperts = 6, kTopK = 2;

double ScoreRef(float logit) { return std::sqrt(std::log1p(std::exp(double{logit}))); }

// Expected ids and weights for the given selections.
void ExpectRouting(const std::vector<float>& logits, const std::vector<std::vector<int>>& picks,
                   float scaling, const std::vector<float>& ids,
                   const std::vector<float>& weights) {
  std::vector<float> want_ids;
  std::vector<double> want_weights;
  for (size_t t = 0; t < picks.size(); ++t) {
    double sum = 0;
    for (int e : picks[t]) sum += ScoreRef(logits[t * kExperts + e]);
    for (int e : picks[t]) {
      want_ids.push_back(static_cast<float>(e));
      want_weights.push_back(ScoreRef(logits[t * kExperts + e]) / (sum + 1e-20) * scaling);
    }
  }
  EXPECT_EQ(ids, want_ids);
  ExpectClose(weights, want_weights, 1e-6);
}

TEST(CpuDeepseekOpsTest, RouteSelectsByBiasedScoreAndWeighsByScore) {
  CpuBackend backend(1);
  const int tokens = 4;
  const std::vector<float> logits = Random(tokens * kExperts, 70, 2.0f);
  const std::vector<float> bias = Random(kExperts, 71);
  std::vector<float> ids(tokens * kTopK), weights(tokens * kTopK);
  backend.deepseek_ops()->Route({.logits = logits.data(),
                                 .tokens = tokens,
                                 .experts = kExperts,
                                 .top_k = kTopK,
                                 .bias = bias.data(),
                                 .scaling = 1.5f,
                                 .ids = ids.data(),
                                 .weights = weights.data()});
  std::vector<std::vector<int>> picks;
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    auto biased = [&](int e) { return ScoreRef(logits[t * kExperts + e]) + bias[e]; };
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return biased(a) > biased(b); });
    picks.push_back({order[0], order[1]});
  }
  ExpectRouting(logits, picks, 1.5f, ids, weights);
}

TEST(CpuDeepseekOpsTest, RouteTiesGoToTheLowerId) {
  CpuBackend backend(1);
  const std::vector<float> logits = {0.3f, 1.2f, -0.5f, 1.2f, 1.2f, 0.0f};
  std::vector<float> ids(kTopK), weights(kTopK);
  backend.deepseek_ops()->Route({.logits = logits.data(),
                                 .tokens = 1,
                                 .experts = kExperts,
                                 .top_k = kTopK,
                                 .ids = ids.data(),
                                 .weights = weights.data()});
  ExpectRouting(logits, {{1, 3}}, 1.0f, ids, weights);
}

TEST(CpuDeepseekOpsTest, RouteHashLayersReadTheTableAtEachTokenId) {
  CpuBackend backend(1);
  const std::vector<float> logits = Random(3 * kExperts, 72);
  const std::vector<float> table = {0, 1, 5, 2, 3, 4, 4, 0};  // [vocab 4, top_k 2]
  const std::vector<int32_t> token_ids = {2, 0, 3};
  std::vector<float> ids(3 * kTopK), weights(3 * kTopK);
  backend.deepseek_ops()->Route({.logits = logits.data(),
                                 .tokens = 3,
                                 .experts = kExperts,
                                 .top_k = kTopK,
                                 .hash_table = table.data(),
                                 .token_ids = token_ids,
                                 .scaling = 2.0f,
                                 .ids = ids.data(),
                                 .weights = weights.data()});
  ExpectRouting(logits, {{3, 4}, {0, 1}, {4, 0}}, 2.0f, ids, weights);
}

// down(silu(min(g, L)) * clamp(u, -L, L)) in double.
std::vector<double> SwiGluRef(const float* x, int hidden, const std::vector<float>& gate_up,
                              const std::vector<float>& down, int inter, float limit) {
  std::vector<double> act(inter), out(hidden);
  for (int i = 0; i < inter; ++i) {
    double g = 0, u = 0;
    for (int h = 0; h < hidden; ++h) {
      g += double{gate_up[i * hidden + h]} * x[h];
      u += double{gate_up[(inter + i) * hidden + h]} * x[h];
    }
    if (limit > 0) {
      g = std::min(g, double{limit});
      u = std::clamp(u, -double{limit}, double{limit});
    }
    act[i] = g / (1 + std::exp(-g)) * u;
  }
  for (int h = 0; h < hidden; ++h) {
    for (int i = 0; i < inter; ++i) out[h] += double{down[h * inter + i]} * act[i];
  }
  return out;
}

class CpuDeepseekMoeTest : public ::testing::TestWithParam<float> {};

// 300 tokens (two passes of the op's token chunks); this rank holds experts 2..4 of 6.
TEST_P(CpuDeepseekMoeTest, AddsLocalExpertsInSelectionOrderThenTheShared) {
  CpuBackend backend(3);
  const int tokens = 300, hidden = 16, inter = 8, shared_inter = 4, begin = 2, local = 3;
  const float limit = GetParam();
  const std::vector<float> x = Random(tokens * hidden, 80);
  std::vector<float> ids(tokens * kTopK), weights = Random(tokens * kTopK, 81);
  for (int i = 0; i < tokens * kTopK; ++i) ids[i] = static_cast<float>((i * 7 + i / 5) % kExperts);
  std::vector<std::vector<float>> gate_up, down;
  std::vector<SwiGluWeights> experts;
  for (int e = 0; e < local; ++e) {
    gate_up.push_back(Random(2 * inter * hidden, 82 + e, 0.5f));
    down.push_back(Random(hidden * inter, 90 + e, 0.5f));
  }
  for (int e = 0; e < local; ++e) experts.push_back({gate_up[e].data(), down[e].data()});
  const std::vector<float> shared_gate_up = Random(2 * shared_inter * hidden, 95, 0.5f);
  const std::vector<float> shared_down = Random(hidden * shared_inter, 96, 0.5f);
  std::vector<float> out(tokens * hidden, 99.0f);
  backend.deepseek_ops()->MoeExperts({.x = x.data(),
                                      .tokens = tokens,
                                      .hidden = hidden,
                                      .ids = ids.data(),
                                      .weights = weights.data(),
                                      .top_k = kTopK,
                                      .expert_begin = begin,
                                      .experts = experts,
                                      .inter = inter,
                                      .shared = {shared_gate_up.data(), shared_down.data()},
                                      .shared_inter = shared_inter,
                                      .swiglu_limit = limit,
                                      .out = out.data()});
  std::vector<double> want(tokens * hidden, 0.0);
  for (int t = 0; t < tokens; ++t) {
    const float* xt = &x[t * hidden];
    for (int i = 0; i < kTopK; ++i) {
      const int e = static_cast<int>(ids[t * kTopK + i]) - begin;
      if (e < 0 || e >= local) continue;
      const std::vector<double> y = SwiGluRef(xt, hidden, gate_up[e], down[e], inter, limit);
      for (int h = 0; h < hidden; ++h) want[t * hidden + h] += weights[t * kTopK + i] * y[h];
    }
    const std::vector<double> y =
        SwiGluRef(xt, hidden, shared_gate_up, shared_down, shared_inter, limit);
    for (int h = 0; h < hidden; ++h) want[t * hidden + h] += y[h];
  }
  ExpectClose(out, want, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Limits, CpuDeepseekMoeTest, ::testing::Values(0.0f, 0.3f));

}  // namespace
}  // namespace spark::engine::backend::cpu
