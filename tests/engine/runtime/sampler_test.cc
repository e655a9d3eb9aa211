#include "engine/runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace spark::engine::runtime {
namespace {

std::vector<float> LogitsOf(const std::vector<float>& probs) {
  std::vector<float> l;
  for (float p : probs) l.push_back(std::log(p));
  return l;
}

const std::vector<float> kProbs = {0.5f, 0.3f, 0.15f, 0.05f};

int NonZero(const std::vector<float>& p) {
  int n = 0;
  for (float x : p) n += x > 0.0f;
  return n;
}

TEST(SamplerTest, GreedyTakesArgmaxAndLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  std::mt19937_64 rng(1);
  EXPECT_EQ(Sample(std::vector<float>{0.1f, 2.0f, -1.0f}, p, {}, {}, rng)->token, 1);
  EXPECT_EQ(Sample(std::vector<float>{3.0f, 1.0f, 3.0f}, p, {}, {}, rng)->token, 0);
}

TEST(SamplerTest, PenaltiesMatchHandComputedValues) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0};
  const std::vector<int32_t> output = {1, 1, 3};
  const auto out = ApplyPenalties(std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f}, p, prompt, output);
  // 0: 2/2 = 1 (prompt only: no presence/frequency); 1: -1*2 - 0.5 - 2*0.25 = -3;
  // 2: untouched; 3: 3/2 - 0.5 - 0.25 = 0.75.
  EXPECT_EQ(out, (std::vector<float>{1.0f, -3.0f, 0.5f, 0.75f}));
}

TEST(SamplerTest, PenaltiesCanChangeTheGreedyChoice) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  std::mt19937_64 rng(1);
  const std::vector<float> logits = {1.0f, 1.5f};
  EXPECT_EQ(Sample(logits, p, {}, std::vector<int32_t>{}, rng)->token, 1);
  EXPECT_EQ(Sample(logits, p, {}, std::vector<int32_t>{1}, rng)->token, 0);
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  SamplingParams p;
  p.top_k = 2;
  const auto probs = SamplingProbs(LogitsOf(kProbs), p, {}, {});
  EXPECT_EQ(NonZero(probs), 2);
  EXPECT_NEAR(probs[0], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(probs[1], 0.3 / 0.8, 1e-6);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  struct Case {
    float top_p;
    int kept;
  };
  for (const Case& c : {Case{0.3f, 1}, Case{0.75f, 2}, Case{0.81f, 3}, Case{0.96f, 4}}) {
    SamplingParams p;
    p.top_p = c.top_p;
    EXPECT_EQ(NonZero(SamplingProbs(LogitsOf(kProbs), p, {}, {})), c.kept) << c.top_p;
  }
}

TEST(SamplerTest, TopPAppliesAfterTopK) {
  SamplingParams p;
  p.top_k = 3;     // 0.5, 0.3, 0.15 -> renormalised 0.526, 0.316, 0.158
  p.top_p = 0.8f;  // 0.526 < 0.8 keeps the second; 0.842 >= 0.8 drops the third.
  EXPECT_EQ(NonZero(SamplingProbs(LogitsOf(kProbs), p, {}, {})), 2);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheTop) {
  SamplingParams p;
  p.min_p = 0.2f;  // Threshold 0.1: drops only 0.05.
  const auto probs = SamplingProbs(LogitsOf(kProbs), p, {}, {});
  EXPECT_EQ(NonZero(probs), 3);
  EXPECT_EQ(probs[3], 0.0f);
  EXPECT_NEAR(probs[2], 0.15 / 0.95, 1e-6);
}

TEST(SamplerTest, TemperatureSharpens) {
  SamplingParams p;
  p.temperature = 0.5f;  // p^2 renormalised.
  const auto probs = SamplingProbs(LogitsOf(kProbs), p, {}, {});
  const double z = 0.25 + 0.09 + 0.0225 + 0.0025;
  EXPECT_NEAR(probs[0], 0.25 / z, 1e-6);
  EXPECT_NEAR(probs[3], 0.0025 / z, 1e-6);
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  SamplingParams p;
  std::mt19937_64 rng(7);
  std::vector<int> counts(4, 0);
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) ++counts[Sample(LogitsOf(kProbs), p, {}, {}, rng)->token];
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(counts[t] / double(kDraws), kProbs[t], 0.01) << t;
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  std::vector<float> logits(50, 0.0f);
  auto draw = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 30; ++i) out.push_back(Sample(logits, p, {}, {}, rng)->token);
    return out;
  };
  EXPECT_EQ(draw(123), draw(123));
  EXPECT_NE(draw(123), draw(124));
}

TEST(SamplerTest, LogprobsComeFromTheRawLogits) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 2;
  p.frequency_penalty = 2.0f;  // Does not change the reported logprobs.
  std::mt19937_64 rng(1);
  auto r = Sample(LogitsOf(kProbs), p, {}, std::vector<int32_t>{0}, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, 1);  // Penalty moved the choice off token 0.
  EXPECT_NEAR(r->logprob, std::log(0.3), 1e-5);
  ASSERT_EQ(r->top_logprobs.size(), 2u);
  EXPECT_EQ(r->top_logprobs[0].token, 0);
  EXPECT_NEAR(r->top_logprobs[0].logprob, std::log(0.5), 1e-5);
  EXPECT_EQ(r->top_logprobs[1].token, 1);
}

TEST(SamplerTest, BadRowsAreInvalidArgument) {
  SamplingParams p;
  std::mt19937_64 rng(1);
  EXPECT_EQ(Sample(std::vector<float>{}, p, {}, {}, rng).status().code(),
            StatusCode::kInvalidArgument);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Sample(std::vector<float>{1.0f, nan}, p, {}, {}, rng).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SamplingParamsTest, ValidateNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  p.temperature = -1.0f;
  EXPECT_NE(p.Validate().message().find("temperature"), std::string::npos);
  p = {};
  p.top_logprobs = 21;
  EXPECT_NE(p.Validate().message().find("top_logprobs"), std::string::npos);
  p = {};
  p.stop = {""};
  EXPECT_EQ(p.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::engine::runtime

namespace spark::engine::runtime {
namespace {

// Prompt scoring's one-pass ScoreToken gives what LogSoftmax and FillLogprobs give: the token's
// log-probability, the top k in the same order (ties to the lower id), and its rank.
TEST(ScoreTokenTest, AgreesWithLogSoftmaxAndFillLogprobs) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(1000);
  for (float& l : row) l = std::round(normal(rng) * 4.0f) / 4.0f;  // many ties
  const std::vector<float> lp = LogSoftmax(row);
  for (int32_t token : {0, 17, 500, 999}) {
    const SampleResult s = ScoreToken(row, token, 5);
    EXPECT_NEAR(s.logprob, lp[token], 1e-5);
    SamplingParams p;
    p.logprobs = true;
    p.top_logprobs = 5;
    SampleResult ref;
    ref.token = token;
    FillLogprobs(row, p, &ref);
    ASSERT_EQ(s.top_logprobs.size(), ref.top_logprobs.size());
    for (size_t i = 0; i < ref.top_logprobs.size(); ++i) {
      EXPECT_EQ(s.top_logprobs[i].token, ref.top_logprobs[i].token) << i;
      EXPECT_NEAR(s.top_logprobs[i].logprob, ref.top_logprobs[i].logprob, 1e-5) << i;
    }
    int above = 0;
    for (float l : row) above += l > row[token];
    EXPECT_EQ(s.rank, above + 1);
  }
  EXPECT_TRUE(ScoreToken(row, 3, 0).top_logprobs.empty());
}

}  // namespace
}  // namespace spark::engine::runtime
