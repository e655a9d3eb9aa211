// RoPE: the rotation against a float64 reference (fp32 within 1e-5, bf16 within 1e-2), and the
// YaRN table against the formulas it implements.
#include "kernels/rope.h"

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

std::vector<double> Reference(const std::vector<float>& x, const std::vector<int32_t>& pos,
                              int heads, int hd, const RopeTable& table) {
  std::vector<double> out(x.begin(), x.end());
  const int half = hd / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double angle = double{static_cast<float>(pos[t]) * table.inv_freq[i]};
        const double c = std::cos(angle) * table.attention_factor;
        const double s = std::sin(angle) * table.attention_factor;
        const size_t base = (t * heads + h) * hd;
        const double a = x[base + i], b = x[base + i + half];
        out[base + i] = a * c - b * s;
        out[base + i + half] = b * c + a * s;
      }
  return out;
}

TEST(RopeTest, Fp32MatchesReferenceAtLargePositions) {
  SPARK_SKIP_WITHOUT_GPU();
  const int tokens = 9, heads = 5, hd = 128;
  const std::vector<int32_t> pos = {0, 1, 2, 17, 255, 1000, 4095, 32767, 131071};
  const auto x = Random(tokens * heads * hd, 11);
  const RopeTable table = RopeInvFreq(hd, 1e6);
  DeviceArray<float> dx(x), dfreq(table.inv_freq);
  DeviceArray<int32_t> dpos(pos);
  SPARK_ASSERT_OK(Rope<float>(dx.get(), dpos.get(), tokens, heads, hd, dfreq.get(), 1.0f, nullptr));
  EXPECT_LT(RelL2(dx.Host(), Reference(x, pos, heads, hd, table)), 1e-5);
}

TEST(RopeTest, Bf16WithYarnTable) {
  SPARK_SKIP_WITHOUT_GPU();
  const int tokens = 4, heads = 3, hd = 64;
  const std::vector<int32_t> pos = {3, 100, 5000, 60000};
  auto x = Random(tokens * heads * hd, 12);
  for (float& f : x) f = RoundBf16(f);
  RopeScaling yarn;
  yarn.type = RopeScaling::Type::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position = 32768;
  const RopeTable table = RopeInvFreq(hd, 1e6, yarn);
  DeviceArray<__nv_bfloat16> dx(ToBf16(x));
  DeviceArray<float> dfreq(table.inv_freq);
  DeviceArray<int32_t> dpos(pos);
  SPARK_ASSERT_OK(Rope<__nv_bfloat16>(dx.get(), dpos.get(), tokens, heads, hd, dfreq.get(),
                                      table.attention_factor, nullptr));
  EXPECT_LT(RelL2(ToFloat(dx.Host()), Reference(x, pos, heads, hd, table)), 1e-2);
}

TEST(RopeInvFreqTest, PlainTableIsThetaPowers) {
  const RopeTable t = RopeInvFreq(8, 10000.0);
  ASSERT_EQ(t.inv_freq.size(), 4u);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_NEAR(t.inv_freq[1], 0.1, 1e-7);
  EXPECT_NEAR(t.inv_freq[2], 0.01, 1e-8);
  EXPECT_NEAR(t.inv_freq[3], 0.001, 1e-9);
  EXPECT_EQ(t.attention_factor, 1.0f);
}

// YaRN keeps the fast dimensions (many rotations over the original context) as they are,
// divides the slow ones by the factor, and scales cos/sin by 0.1 ln(factor) + 1.
TEST(RopeInvFreqTest, YarnBlendsBetweenExtrapolationAndInterpolation) {
  const int hd = 128;
  const double theta = 1e6;
  RopeScaling yarn;
  yarn.type = RopeScaling::Type::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position = 32768;
  const RopeTable plain = RopeInvFreq(hd, theta);
  const RopeTable t = RopeInvFreq(hd, theta, yarn);
  // Correction range: dim * ln(L / (2 pi beta)) / (2 ln theta) for beta 32 and 1.
  const double low = std::floor(hd * std::log(32768 / (32 * 2 * M_PI)) / (2 * std::log(theta)));
  const double high = std::ceil(hd * std::log(32768 / (1 * 2 * M_PI)) / (2 * std::log(theta)));
  for (int i = 0; i < hd / 2; ++i) {
    if (i <= low) {
      EXPECT_FLOAT_EQ(t.inv_freq[i], plain.inv_freq[i]) << i;
    }
    if (i >= high) {
      EXPECT_FLOAT_EQ(t.inv_freq[i], plain.inv_freq[i] / 4.0f) << i;
    }
    if (i > low && i < high) {
      EXPECT_LT(t.inv_freq[i], plain.inv_freq[i]) << i;
      EXPECT_GT(t.inv_freq[i], plain.inv_freq[i] / 4.0f) << i;
    }
  }
  EXPECT_NEAR(t.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  yarn.mscale = 1.0;
  yarn.mscale_all_dim = 1.0;  // DeepSeek's setting: the two mscales cancel
  EXPECT_FLOAT_EQ(RopeInvFreq(hd, theta, yarn).attention_factor, 1.0f);
}

}  // namespace
}  // namespace spark::kernels
