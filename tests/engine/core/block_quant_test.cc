// Dequantisation of FP8 block-scaled and FP4 (e2m1 + E8M0) weights against values worked out by
// hand from the format definitions.
#include "engine/core/block_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace spark::engine::core {
namespace {

TEST(BlockQuantTest, E8M0IsAPowerOfTwo) {
  EXPECT_EQ(E8M0ToFloat(127), 1.0f);
  EXPECT_EQ(E8M0ToFloat(128), 2.0f);
  EXPECT_EQ(E8M0ToFloat(126), 0.5f);
  EXPECT_EQ(E8M0ToFloat(117), 1.0f / 1024.0f);
  EXPECT_TRUE(std::isnan(E8M0ToFloat(0xFF)));
}

TEST(BlockQuantTest, E2M1Table) {
  const float expected[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                              -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t n = 0; n < 16; ++n) EXPECT_EQ(E2M1ToFloat(n), expected[n]) << int{n};
}

TEST(BlockQuantTest, Fp8BlocksScaleEachBlockIncludingPartialOnes) {
  // [3, 3] weight with 2 x 2 blocks: scale blocks [2, 2], the last row/column blocks partial.
  // E4M3: 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0, 0x3C = 1.5, 0x30 = 0.5.
  const std::vector<uint8_t> w = {0x38, 0x40, 0xC0,  //
                                  0x3C, 0x30, 0x38,  //
                                  0x40, 0x38, 0x3C};
  const std::vector<float> scales = {10, 100,  //
                                     -1, 0.25f};
  auto out = DequantFp8Blocks(w, 3, 3, scales, {2, 2}, "layers.0.attn.wq_a.weight");
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> expected = {10, 20, -200,  //
                                       15, 5,  100,   //
                                       -2, -1, 0.375f};
  EXPECT_EQ(*out, expected);
}

TEST(BlockQuantTest, Fp8RejectsWrongScaleCountNamingTheTensor) {
  const std::vector<uint8_t> w(4 * 4, 0x38);
  const std::vector<float> scales(3, 1.0f);
  auto out = DequantFp8Blocks(w, 4, 4, scales, {2, 2}, "layers.1.attn.wo_b.weight");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("layers.1.attn.wo_b.weight.scale"), std::string::npos);
  EXPECT_NE(out.status().message().find("expected 4"), std::string::npos);
}

TEST(BlockQuantTest, Fp4LowNibbleIsTheEvenColumn) {
  // One row of 64 columns: two 1 x 32 scale blocks (2^0 and 2^-2).
  std::vector<uint8_t> packed(32, 0x00);
  packed[0] = 0x72;   // col 0 = 1.0 (0x2), col 1 = 6.0 (0x7)
  packed[15] = 0x9F;  // col 30 = -6.0 (0xF), col 31 = -0.5 (0x9)
  packed[16] = 0x35;  // col 32 = 3.0 (0x5), col 33 = 1.5 (0x3), times 0.25
  const std::vector<uint8_t> scales = {127, 125};
  auto out = DequantFp4(packed, 1, 64, scales, "layers.3.ffn.experts.0.w1.weight");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0], 1.0f);
  EXPECT_EQ((*out)[1], 6.0f);
  EXPECT_EQ((*out)[30], -6.0f);
  EXPECT_EQ((*out)[31], -0.5f);
  EXPECT_EQ((*out)[32], 0.75f);
  EXPECT_EQ((*out)[33], 0.375f);
  EXPECT_EQ((*out)[2], 0.0f);
}

TEST(BlockQuantTest, Fp4RejectsBadShapes) {
  const std::vector<uint8_t> packed(16), scales(1);
  EXPECT_EQ(DequantFp4(packed, 1, 33, scales, "w").status().code(), StatusCode::kInvalidArgument);
  auto short_scales = DequantFp4(packed, 1, 32, std::vector<uint8_t>{}, "experts.1.w2.weight");
  ASSERT_FALSE(short_scales.ok());
  EXPECT_NE(short_scales.status().message().find("experts.1.w2.weight.scale"), std::string::npos);
}

}  // namespace
}  // namespace spark::engine::core
