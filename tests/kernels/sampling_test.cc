// GPU sampling against a host reference that sorts: greedy must equal the argmax; sampled ids
// must be in the exact top-k / top-p set and sit where the kept cumulative mass crosses
// uniform * total (up to float rounding of the running sums).
#include "kernels/sampling.h"

#include <algorithm>
#include <numeric>

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

struct Row {
  float temperature;
  int top_k;
  float top_p;
  float uniform;
};

// The kept set: p >= the k-th largest p, then the fewest largest reaching top_p of that mass.
std::vector<bool> KeptSet(const std::vector<double>& p, int top_k, double top_p) {
  std::vector<double> sorted = p;
  std::sort(sorted.rbegin(), sorted.rend());
  double t = 0;
  if (top_k > 0 && top_k < static_cast<int>(p.size())) t = sorted[top_k - 1];
  double mass = 0;
  for (double v : sorted)
    if (v >= t) mass += v;
  if (top_p < 1) {
    double run = 0;
    for (double v : sorted) {
      if (v < t) break;
      run += v;
      if (run >= top_p * mass) {
        t = v;
        break;
      }
    }
  }
  std::vector<bool> keep(p.size());
  for (size_t i = 0; i < p.size(); ++i) keep[i] = p[i] >= t;
  return keep;
}

TEST(SampleTest, MatchesSortedReference) {
  SPARK_SKIP_WITHOUT_GPU();
  const int vocab = 151936;
  const std::vector<Row> rows = {{0.0f, 0, 1.0f, 0.5f},    {0.7f, 0, 1.0f, 0.3f},
                                 {1.0f, 50, 1.0f, 0.9f},   {1.0f, 1, 1.0f, 0.99f},
                                 {0.8f, 0, 0.9f, 0.1f},    {1.2f, 40, 0.5f, 0.75f},
                                 {0.6f, 0, 0.95f, 0.999f}, {2.0f, 1000, 0.8f, 0.01f}};
  const int n = static_cast<int>(rows.size());
  const auto logits = Random(size_t{static_cast<size_t>(n)} * vocab, 51, 3.0f);
  std::vector<float> temp, top_p, uni;
  std::vector<int32_t> top_k;
  for (const Row& r : rows) {
    temp.push_back(r.temperature);
    top_k.push_back(r.top_k);
    top_p.push_back(r.top_p);
    uni.push_back(r.uniform);
  }
  DeviceArray<float> dl(logits), dt(temp), dp(top_p), du(uni);
  DeviceArray<int32_t> dk(top_k), dtok(n);
  SPARK_ASSERT_OK(
      Sample(dl.get(), n, vocab, {dt.get(), dk.get(), dp.get(), du.get()}, dtok.get(), nullptr));
  const auto tokens = dtok.Host();
  for (int r = 0; r < n; ++r) {
    const float* row = &logits[size_t{static_cast<size_t>(r)} * vocab];
    const int argmax = static_cast<int>(std::max_element(row, row + vocab) - row);
    if (rows[r].temperature <= 0) {
      EXPECT_EQ(tokens[r], argmax) << "row " << r;
      continue;
    }
    std::vector<double> p(vocab);
    for (int i = 0; i < vocab; ++i)
      p[i] = std::exp((double{row[i]} - row[argmax]) / rows[r].temperature);
    const std::vector<bool> keep = KeptSet(p, rows[r].top_k, rows[r].top_p);
    ASSERT_GE(tokens[r], 0);
    ASSERT_LT(tokens[r], vocab);
    EXPECT_TRUE(keep[tokens[r]]) << "row " << r << " picked " << tokens[r] << " outside the set";
    double total = 0, before = 0;
    for (int i = 0; i < vocab; ++i)
      if (keep[i]) total += p[i];
    for (int i = 0; i < tokens[r]; ++i)
      if (keep[i]) before += p[i];
    const double target = rows[r].uniform * total;
    EXPECT_LE(before, target + 1e-4 * total) << "row " << r;
    EXPECT_GT(before + p[tokens[r]], target - 1e-4 * total) << "row " << r;
    if (rows[r].top_k == 1) {
      EXPECT_EQ(tokens[r], argmax);
    }
  }
}

// Over many uniforms, a top-k = 3 row picks its three ids with the softmax's proportions.
TEST(SampleTest, FrequenciesFollowTheDistribution) {
  SPARK_SKIP_WITHOUT_GPU();
  const int vocab = 1000, n = 4000;
  std::vector<float> logits(size_t{n} * vocab, -10.0f);
  for (int r = 0; r < n; ++r) {
    logits[r * vocab + 7] = 2.0f;
    logits[r * vocab + 500] = 1.0f;
    logits[r * vocab + 999] = 0.0f;
  }
  std::vector<float> temp(n, 1.0f), top_p(n, 1.0f), uni(n);
  std::vector<int32_t> top_k(n, 3);
  std::mt19937 rng(52);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (float& x : uni) x = u(rng);
  DeviceArray<float> dl(logits), dt(temp), dp(top_p), du(uni);
  DeviceArray<int32_t> dk(top_k), dtok(n);
  SPARK_ASSERT_OK(
      Sample(dl.get(), n, vocab, {dt.get(), dk.get(), dp.get(), du.get()}, dtok.get(), nullptr));
  const auto tokens = dtok.Host();
  int c7 = 0, c500 = 0, c999 = 0;
  for (int32_t t : tokens) {
    c7 += t == 7;
    c500 += t == 500;
    c999 += t == 999;
  }
  EXPECT_EQ(c7 + c500 + c999, n);
  const double z = std::exp(2.0) + std::exp(1.0) + 1.0;
  EXPECT_NEAR(c7 / double{n}, std::exp(2.0) / z, 0.03);
  EXPECT_NEAR(c500 / double{n}, std::exp(1.0) / z, 0.03);
}

}  // namespace
}  // namespace spark::kernels
