// MoE routing against a host reference for each scoring function, with and without grouped
// selection and bias, and dispatch + combine against a direct weighted sum of row copies.
// Ids must match exactly (inputs are spread so no near-ties), weights within 1e-6 relative.
#include "kernels/moe.h"

#include <algorithm>
#include <numeric>

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;
using Scoring = RouterOptions::Scoring;

void ReferenceRoute(const float* lg, const RouterOptions& o, const std::vector<float>& bias,
                    std::vector<int>* ids, std::vector<double>* weights) {
  const int E = o.num_experts;
  std::vector<double> score(E), select(E);
  double mx = *std::max_element(lg, lg + E), sum = 0;
  for (int e = 0; e < E; ++e) {
    const double x = lg[e];
    if (o.scoring == Scoring::kSoftmax)
      sum += score[e] = std::exp(x - mx);
    else if (o.scoring == Scoring::kSigmoid)
      score[e] = 1 / (1 + std::exp(-x));
    else
      score[e] = std::sqrt(std::log1p(std::exp(x)));
  }
  for (int e = 0; e < E; ++e) {
    if (o.scoring == Scoring::kSoftmax) score[e] /= sum;
    select[e] = score[e] + (bias.empty() ? 0.0 : bias[e]);
  }
  if (o.n_group > 1) {
    const int per = E / o.n_group;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < o.n_group; ++g) {
      std::vector<double> s(select.begin() + g * per, select.begin() + (g + 1) * per);
      std::sort(s.rbegin(), s.rend());
      groups.push_back({-(s[0] + s[1]), g});
    }
    std::sort(groups.begin(), groups.end());
    std::vector<bool> keep(o.n_group, false);
    for (int i = 0; i < o.topk_group; ++i) keep[groups[i].second] = true;
    for (int e = 0; e < E; ++e)
      if (!keep[e / per]) select[e] = -1e300;
  }
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return select[a] > select[b]; });
  double chosen = 0;
  for (int i = 0; i < o.top_k; ++i) chosen += score[order[i]];
  ids->assign(order.begin(), order.begin() + o.top_k);
  weights->clear();
  for (int i = 0; i < o.top_k; ++i) {
    const double w = score[order[i]];
    weights->push_back((o.norm_topk_prob ? w / chosen : w) * o.routed_scaling_factor);
  }
}

struct RouteCase {
  Scoring scoring;
  int experts, top_k, n_group, topk_group;
  bool norm, bias;
  float scaling;
};

class RouteTest : public ::testing::TestWithParam<RouteCase> {};

TEST_P(RouteTest, MatchesReference) {
  SPARK_SKIP_WITHOUT_GPU();
  const RouteCase& c = GetParam();
  const int rows = 37;
  // Distinct logits per row: a shuffled ramp plus small noise, no near-ties.
  std::vector<float> logits(rows * c.experts);
  std::mt19937 rng(41);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> p(c.experts);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    for (int e = 0; e < c.experts; ++e) logits[r * c.experts + e] = 4.0f * p[e] / c.experts - 2.0f;
  }
  std::vector<float> bias;
  if (c.bias) bias = Random(c.experts, 42, 0.01f);
  RouterOptions o;
  o.scoring = c.scoring;
  o.num_experts = c.experts;
  o.top_k = c.top_k;
  o.n_group = c.n_group;
  o.topk_group = c.topk_group;
  o.norm_topk_prob = c.norm;
  o.routed_scaling_factor = c.scaling;
  DeviceArray<float> dlogits(logits), dbias(bias), dweights(rows * c.top_k);
  DeviceArray<int32_t> dids(rows * c.top_k);
  if (c.bias) o.selection_bias = dbias.get();
  SPARK_ASSERT_OK(RouteTopK(dlogits.get(), rows, o, dids.get(), dweights.get(), nullptr));
  const auto ids = dids.Host();
  const auto weights = dweights.Host();
  for (int r = 0; r < rows; ++r) {
    std::vector<int> want_ids;
    std::vector<double> want_w;
    ReferenceRoute(&logits[r * c.experts], o, bias, &want_ids, &want_w);
    for (int k = 0; k < c.top_k; ++k) {
      ASSERT_EQ(ids[r * c.top_k + k], want_ids[k]) << "row " << r << " k " << k;
      ASSERT_NEAR(weights[r * c.top_k + k], want_w[k], 1e-6 * std::max(1.0, std::fabs(want_w[k])));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scorings, RouteTest,
    ::testing::Values(RouteCase{Scoring::kSoftmax, 8, 2, 1, 1, true, false, 1.0f},
                      RouteCase{Scoring::kSoftmax, 128, 8, 1, 1, false, false, 1.0f},
                      RouteCase{Scoring::kSigmoid, 256, 8, 8, 4, true, true, 2.5f},
                      RouteCase{Scoring::kSqrtSoftplus, 64, 6, 1, 1, true, true, 1.5f},
                      RouteCase{Scoring::kSqrtSoftplus, 384, 6, 8, 2, false, false, 1.0f}));

TEST(RouteTest, RejectsBadOptions) {
  SPARK_SKIP_WITHOUT_GPU();
  RouterOptions o;
  o.num_experts = 10;
  o.top_k = 11;
  EXPECT_EQ(RouteTopK(nullptr, 1, o, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  o.top_k = 2;
  o.n_group = 3;  // does not divide 10
  EXPECT_EQ(RouteTopK(nullptr, 1, o, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// Dispatch gathers each local expert's rows; an identity "expert" (ys = xs) makes the combine a
// weighted sum of the token's own row over its local picks.
TEST(MoeDispatchTest, GathersAndCombinesLocalExperts) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 29, hidden = 80, top_k = 3, experts = 16, begin = 4, local = 8;
  std::vector<int32_t> ids(rows * top_k);
  std::mt19937 rng(43);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> p(experts);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    for (int k = 0; k < top_k; ++k) ids[r * top_k + k] = p[k];
  }
  const auto x = Random(rows * hidden, 44);
  const auto w = Random(rows * top_k, 45);
  DeviceArray<float> dx(x), dw(w), xs(rows * top_k * hidden), out(rows * hidden);
  DeviceArray<int32_t> dids(ids), counts(local), offsets(local + 1), cursor(local),
      position(rows * top_k);
  SPARK_ASSERT_OK(MoeDispatch<float>(dx.get(), rows, hidden, dids.get(), top_k, begin, local,
                                     counts.get(), offsets.get(), cursor.get(), position.get(),
                                     xs.get(), nullptr));
  const auto hc = counts.Host(), ho = offsets.Host(), hp = position.Host();
  const auto hxs = xs.Host();
  for (int e = 0; e < local; ++e) {
    int want = 0;
    for (int32_t id : ids) want += id == begin + e;
    ASSERT_EQ(hc[e], want) << "expert " << e;
    ASSERT_EQ(ho[e + 1] - ho[e], want);
  }
  for (int i = 0; i < rows * top_k; ++i) {
    const int e = ids[i] - begin;
    if (e < 0 || e >= local) {
      ASSERT_EQ(hp[i], -1);
      continue;
    }
    ASSERT_GE(hp[i], ho[e]);
    ASSERT_LT(hp[i], ho[e + 1]);
    for (int d = 0; d < hidden; ++d)
      ASSERT_EQ(hxs[hp[i] * hidden + d], x[(i / top_k) * hidden + d]);
  }
  SPARK_ASSERT_OK(MoeCombine<float>(xs.get(), position.get(), dw.get(), rows, top_k, hidden,
                                    out.get(), nullptr));
  std::vector<double> want(rows * hidden, 0.0);
  for (int i = 0; i < rows * top_k; ++i) {
    if (ids[i] < begin || ids[i] >= begin + local) continue;
    for (int d = 0; d < hidden; ++d)
      want[(i / top_k) * hidden + d] += w[i] * x[(i / top_k) * hidden + d];
  }
  EXPECT_LT(RelL2(out.Host(), want), 1e-6);
}

}  // namespace
}  // namespace spark::kernels
