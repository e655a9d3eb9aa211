// The CPU reference of DeepSeek-V4.1's ops (cpu_deepseek_v41.cc) on values worked out by hand
// from the reference's formulas: the three fake quantisers (scale rounding, ties of the e2m1
// grid, E4M3-rounded scales, rows the block does not divide), the candidate-block mask (pinned
// newest block, unreachable blocks dropped) and Engram's gated write.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"

namespace spark::engine::backend::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Quantised(FakeQuantFormat format, std::vector<float> x, int block) {
  CpuBackend backend(1);
  backend.deepseek_ops()->FakeQuant({x.data(), 1, static_cast<int>(x.size()), block, format});
  return x;
}

std::vector<float> Padded(std::vector<float> head, size_t n) {
  head.resize(n, 0.0f);
  return head;
}

// amax 1 -> scale 2^ceil(log2(1/448)) = 2^-8; 0.3 * 256 = 76.8 rounds to 80 (step 8 in
// [64, 128)); 0.001 * 256 = 0.256 rounds to 0.25 (step 1/32 in [0.25, 0.5)).
TEST(CpuDeepseekV41OpsTest, Fp8WindowQuantiser) {
  const std::vector<float> got =
      Quantised(FakeQuantFormat::kFp8Ue8m0, Padded({1.0f, 0.3f, -0.3f, 0.001f}, 64), 32);
  EXPECT_FLOAT_EQ(got[0], 1.0f);
  EXPECT_FLOAT_EQ(got[1], 80.0f / 256);
  EXPECT_FLOAT_EQ(got[2], -80.0f / 256);
  EXPECT_FLOAT_EQ(got[3], 0.25f / 256);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(got[i], 0.0f);  // an all-zero block stays zero
}

// amax 6 -> scale 1: the e2m1 grid's ties go to the even code (2.5 -> 2, 0.25 -> 0, 5 -> 4,
// 1.25 -> 1) and up at odd ones (0.75 -> 1, 3.5 -> 4, 1.75 -> 2).
TEST(CpuDeepseekV41OpsTest, Fp4IndexerQuantiserTies) {
  const std::vector<float> got =
      Quantised(FakeQuantFormat::kFp4Ue8m0,
                Padded({6.0f, 2.5f, 0.75f, 0.25f, 5.0f, 3.5f, -1.25f, -1.75f, 0.3f}, 32), 32);
  const std::vector<float> want = {6.0f, 2.0f, 1.0f, 0.0f, 4.0f, 4.0f, -1.0f, -2.0f, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

// amax 1.3 -> scale e4m3(1.3 / 6 = 0.2167) = 0.21875 (step 1/64); 1.3 / 0.21875 = 5.94 -> 6.
// amax 3 (second block) -> scale 0.5; 0.2 / 0.5 = 0.4 -> 0.5.
TEST(CpuDeepseekV41OpsTest, Fp4EntryQuantiserRoundsItsScaleToE4m3) {
  std::vector<float> x = Padded({1.3f, 0.5f}, 16);
  const std::vector<float> second = Padded({3.0f, 1.0f, 0.2f}, 16);
  x.insert(x.end(), second.begin(), second.end());
  const std::vector<float> got = Quantised(FakeQuantFormat::kFp4E4m3, x, 16);
  EXPECT_FLOAT_EQ(got[0], 6 * 0.21875f);
  EXPECT_FLOAT_EQ(got[1], 2 * 0.21875f);  // 0.5 / 0.21875 = 2.29 -> 2
  EXPECT_FLOAT_EQ(got[16], 3.0f);
  EXPECT_FLOAT_EQ(got[17], 1.0f);
  EXPECT_FLOAT_EQ(got[18], 0.25f);
}

TEST(CpuDeepseekV41OpsTest, RowsTheBlockDoesNotDivideStayUnchanged) {
  const std::vector<float> x = Padded({0.3f, 1.0f}, 20);
  EXPECT_EQ(Quantised(FakeQuantFormat::kFp8Ue8m0, x, 32), x);
}

// Blocks of 4 over 10 candidates: query 0 keeps its newest (pinned) block and the best other
// one; query 1 sees 3 candidates (one block, pinned; the second block is unreachable and
// dropped); query 2 sees none.
TEST(CpuDeepseekV41OpsTest, CandidateBlocksPinTheNewestAndDropUnreachable) {
  std::vector<float> scores = {1, 5, 2, 0,     3,     3,     3,     3,     0.5f,  0.1f,  //
                               1, 2, 3, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf};
  scores.resize(30, -kInf);
  const std::vector<int32_t> count = {10, 3, 0};
  std::vector<float> mask(30, 1.0f);
  CpuBackend backend(1);
  backend.deepseek_ops()->CandidateBlocks({.scores = scores.data(),
                                           .count = count,
                                           .stride = 10,
                                           .block_size = 4,
                                           .top_blocks = 2,
                                           .mask = mask.data()});
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(mask[c], c < 4 || c >= 8 ? 0.0f : -kInf) << "query 0, candidate " << c;
    EXPECT_EQ(mask[10 + c], c < 4 ? 0.0f : -kInf) << "query 1, candidate " << c;
    EXPECT_EQ(mask[20 + c], -kInf) << "query 2, candidate " << c;
  }
}

// Two streams of width 2: stream 0 [1, 0] with key [1, 1] gives dot 1 * rsqrt(0.5) * rsqrt(1) /
// sqrt(2) = 1, gate sigmoid(1); stream 1 [0, 2] with key [0, 1] gives 2 * rsqrt(2) *
// rsqrt(0.5) / sqrt(2) = sqrt(2), gate sigmoid(2^(1/4)); a negated stream gets
// sigmoid(-sqrt(1)).
TEST(CpuDeepseekV41OpsTest, EngramGateWritesTheGatedValue) {
  std::vector<float> streams = {1, 0, 0, 2, -1, 0, 0, 2};
  const std::vector<float> kv = {1, 1, 0, 1, 10, 20, 1, 1, 0, 1, 10, 20};
  const std::vector<float> weight = {1, 1, 1, 1};
  CpuBackend backend(1);
  backend.deepseek_ops()->EngramGate({.streams = streams.data(),
                                      .kv = kv.data(),
                                      .weight = weight.data(),
                                      .tokens = 2,
                                      .n = 2,
                                      .hidden = 2,
                                      .eps = 0.0f});
  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const double g0 = sigmoid(1.0), g1 = sigmoid(std::pow(2.0, 0.25)), g2 = sigmoid(-1.0);
  const std::vector<double> want = {1 + 10 * g0,  20 * g0, 10 * g1, 2 + 20 * g1,
                                    -1 + 10 * g2, 20 * g2, 10 * g1, 2 + 20 * g1};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(streams[i], want[i], 1e-5) << i;
}

}  // namespace
}  // namespace spark::engine::backend::cpu
