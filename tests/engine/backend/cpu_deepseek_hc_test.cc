// CpuDeepseekOps' hyper-connection (mHC) ops against naive references in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "tests/engine/backend/deepseek_test_util.h"

namespace spark::engine::backend::cpu {
namespace {

using testing::ExpectClose;
using testing::Random;

constexpr int kN = 4, kHidden = 8, kTokens = 3;
constexpr float kNormEps = 1e-6f, kHcEps = 1e-6f;

double SigmoidRef(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// m = fn (f / rms(f)) for one token's flat streams.
std::vector<double> ProjectRef(const float* x, const std::vector<float>& fn, int outputs) {
  const int width = kN * kHidden;
  double sum = 0;
  for (int i = 0; i < width; ++i) sum += double{x[i]} * x[i];
  const double inv = 1.0 / std::sqrt(sum / width + kNormEps);
  std::vector<double> m(outputs);
  for (int o = 0; o < outputs; ++o) {
    for (int i = 0; i < width; ++i) m[o] += double{fn[o * width + i]} * x[i] * inv;
  }
  return m;
}

struct Site {
  std::vector<float> streams = Random(kTokens * kN * kHidden, 50);
  std::vector<float> fn = Random((2 + kN) * kN * kN * kHidden, 51, 0.2f);
  std::vector<float> base = Random((2 + kN) * kN, 52);
  std::vector<float> scale = {0.8f, 1.3f, 0.6f};
};

// Few iterations make each one count; twenty (V4's) leave comb doubly stochastic.
class CpuDeepseekHcMixTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuDeepseekHcMixTest, MatchesNaiveSinkhorn) {
  CpuBackend backend(2);
  Site s;
  const int iters = GetParam();
  std::vector<float> pre(kTokens * kN), post(kTokens * kN), comb(kTokens * kN * kN);
  backend.deepseek_ops()->HcMix({s.streams.data(), kTokens, kN, kHidden, s.fn.data(), s.base.data(),
                                 s.scale.data(), kNormEps, kHcEps, iters, pre.data(), post.data(),
                                 comb.data()});
  std::vector<double> want_pre, want_post, want_comb;
  for (int t = 0; t < kTokens; ++t) {
    const std::vector<double> m = ProjectRef(&s.streams[t * kN * kHidden], s.fn, (2 + kN) * kN);
    for (int j = 0; j < kN; ++j) {
      want_pre.push_back(SigmoidRef(m[j] * s.scale[0] + s.base[j]) + kHcEps);
      want_post.push_back(2 * SigmoidRef(m[kN + j] * s.scale[1] + s.base[kN + j]));
    }
    std::vector<double> c(kN * kN);
    for (int i = 0; i < kN; ++i) {
      std::vector<double> row(kN);
      for (int j = 0; j < kN; ++j) {
        row[j] = m[2 * kN + i * kN + j] * s.scale[2] + s.base[2 * kN + i * kN + j];
      }
      const std::vector<double> p = testing::SoftmaxRef(row);
      for (int j = 0; j < kN; ++j) c[i * kN + j] = p[j] + kHcEps;
    }
    auto normalise = [&](bool by_rows) {
      for (int a = 0; a < kN; ++a) {
        double sum = 0;
        for (int b = 0; b < kN; ++b) sum += by_rows ? c[a * kN + b] : c[b * kN + a];
        for (int b = 0; b < kN; ++b) (by_rows ? c[a * kN + b] : c[b * kN + a]) /= sum + kHcEps;
      }
    };
    normalise(false);
    for (int it = 1; it < iters; ++it) {
      normalise(true);
      normalise(false);
    }
    want_comb.insert(want_comb.end(), c.begin(), c.end());
  }
  ExpectClose(pre, want_pre, 1e-5);
  ExpectClose(post, want_post, 1e-5);
  ExpectClose(comb, want_comb, 1e-5);
  for (int j = 0; j < kN && iters == 20; ++j) {
    double row = 0, column = 0;
    for (int i = 0; i < kN; ++i) {
      row += comb[j * kN + i];
      column += comb[i * kN + j];
    }
    EXPECT_NEAR(row, 1.0, 1e-4);
    EXPECT_NEAR(column, 1.0, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Iterations, CpuDeepseekHcMixTest, ::testing::Values(1, 2, 3, 20));

TEST(CpuDeepseekOpsTest, HcMixPreOnlyForTheHead) {
  CpuBackend backend(1);
  Site s;
  const std::vector<float> fn = Random(kN * kN * kHidden, 53, 0.2f), base = Random(kN, 54);
  const std::vector<float> scale = {1.1f};
  std::vector<float> pre(kTokens * kN);
  backend.deepseek_ops()->HcMix({.streams = s.streams.data(),
                                 .tokens = kTokens,
                                 .n = kN,
                                 .hidden = kHidden,
                                 .fn = fn.data(),
                                 .base = base.data(),
                                 .scale = scale.data(),
                                 .norm_eps = kNormEps,
                                 .hc_eps = kHcEps,
                                 .pre = pre.data()});
  std::vector<double> want;
  for (int t = 0; t < kTokens; ++t) {
    const std::vector<double> m = ProjectRef(&s.streams[t * kN * kHidden], fn, kN);
    for (int j = 0; j < kN; ++j) want.push_back(SigmoidRef(m[j] * scale[0] + base[j]) + kHcEps);
  }
  ExpectClose(pre, want, 1e-5);
}

TEST(CpuDeepseekOpsTest, HcExpandCollapseAndPost) {
  CpuBackend backend(2);
  DeepseekOps& ops = *backend.deepseek_ops();
  const std::vector<float> x = Random(kTokens * kHidden, 55);
  std::vector<float> streams(kTokens * kN * kHidden);
  ops.HcExpand(x.data(), kTokens, kN, kHidden, streams.data());
  for (int t = 0; t < kTokens; ++t) {
    for (int j = 0; j < kN; ++j) {
      for (int h = 0; h < kHidden; ++h) {
        ASSERT_EQ(streams[(t * kN + j) * kHidden + h], x[t * kHidden + h]);
      }
    }
  }
  streams = Random(streams.size(), 56);
  const std::vector<float> pre = Random(kTokens * kN, 57), post = Random(kTokens * kN, 58);
  const std::vector<float> comb = Random(kTokens * kN * kN, 59), y = Random(kTokens * kHidden, 60);
  std::vector<float> collapsed(kTokens * kHidden);
  ops.HcCollapse(streams.data(), pre.data(), kTokens, kN, kHidden, collapsed.data());
  std::vector<double> want_collapsed, want_streams;
  for (int t = 0; t < kTokens; ++t) {
    for (int h = 0; h < kHidden; ++h) {
      double sum = 0;
      for (int j = 0; j < kN; ++j)
        sum += double{pre[t * kN + j]} * streams[(t * kN + j) * kHidden + h];
      want_collapsed.push_back(sum);
    }
    for (int k = 0; k < kN; ++k) {
      for (int h = 0; h < kHidden; ++h) {
        double sum = double{post[t * kN + k]} * y[t * kHidden + h];
        for (int j = 0; j < kN; ++j) {
          sum += double{comb[t * kN * kN + j * kN + k]} * streams[(t * kN + j) * kHidden + h];
        }
        want_streams.push_back(sum);
      }
    }
  }
  ExpectClose(collapsed, want_collapsed, 1e-5);
  ops.HcPost(streams.data(), y.data(), post.data(), comb.data(), kTokens, kN, kHidden);
  ExpectClose(streams, want_streams, 1e-5);
}

}  // namespace
}  // namespace spark::engine::backend::cpu
