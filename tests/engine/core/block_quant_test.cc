// Dequantisation of FP8 block-scaled and FP4 (e2m1 + E8M0) weights against values worked out by
// hand from the format definitions; FP8 quantisation (rounding, saturation, block scales).
#include "engine/core/block_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/core/dtype.h"

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

// Every finite E4M3 value encodes to its own byte; halfway points round to the even neighbour;
// values past 448 saturate.
TEST(BlockQuantTest, Fp8EncodingRoundsToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    const auto code = static_cast<uint8_t>(b);
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    EXPECT_EQ(FloatToF8E4M3(F8E4M3ToFloat(code)), code) << b;
  }
  EXPECT_EQ(FloatToF8E4M3(1.0625f), 0x38);           // halfway 1.0 (even) / 1.125
  EXPECT_EQ(FloatToF8E4M3(1.1875f), 0x3A);           // halfway 1.125 / 1.25 (even)
  EXPECT_EQ(FloatToF8E4M3(1.07f), 0x39);             // above halfway: 1.125
  EXPECT_EQ(FloatToF8E4M3(1.875f + 0.0625f), 0x40);  // halfway 1.875 / 2.0 (even, next binade)
  EXPECT_EQ(FloatToF8E4M3(1.5f / 512), 0x02);        // subnormals: halfway 2^-9 / 2 x 2^-9 (even)
  EXPECT_EQ(FloatToF8E4M3(0.5f / 512), 0x00);        // halfway 0 (even) / 2^-9
  EXPECT_EQ(FloatToF8E4M3(-3.0f), 0xC4);
  EXPECT_EQ(FloatToF8E4M3(460.0f), 0x7E);  // 448
  EXPECT_EQ(FloatToF8E4M3(-1e9f), 0xFE);
  EXPECT_EQ(FloatToF8E4M3(std::nanf("")), 0x7F);
}

// Each block's largest magnitude maps to 448; dequantising gives every value back within half
// an E4M3 step of its block (relative 1/16 of the block's largest value, at most), and an
// all-zero block gets scale 1.
TEST(BlockQuantTest, Fp8QuantisationScalesEachBlockToItsMaximum) {
  const int64_t rows = 5, cols = 7, block = 4;  // 2 x 2 blocks, partial ones at the ends
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = dist(rng);
  for (int64_t r = 4; r < rows; ++r)
    for (int64_t c = 4; c < cols; ++c) x[r * cols + c] = 0.0f;  // block (1, 1): all zero
  const Fp8Blocks q = QuantizeFp8Blocks(x, rows, cols, block);
  ASSERT_EQ(q.values.size(), x.size());
  ASSERT_EQ(q.scales.size(), 4u);
  EXPECT_EQ(q.scales[3], 1.0f);
  auto back = DequantFp8Blocks(q.values, rows, cols, q.scales, {block, block}, "w");
  ASSERT_TRUE(back.ok());
  for (int64_t sb = 0; sb < 3; ++sb) {
    const int64_t r0 = sb / 2 * block, c0 = sb % 2 * block;
    float amax = 0.0f;
    for (int64_t r = r0; r < std::min(rows, r0 + block); ++r)
      for (int64_t c = c0; c < std::min(cols, c0 + block); ++c)
        amax = std::max(amax, std::fabs(x[r * cols + c]));
    EXPECT_FLOAT_EQ(q.scales[sb], amax / 448.0f) << sb;
    for (int64_t r = r0; r < std::min(rows, r0 + block); ++r)
      for (int64_t c = c0; c < std::min(cols, c0 + block); ++c) {
        EXPECT_LE(std::fabs((*back)[r * cols + c] - x[r * cols + c]), amax / 16.0f + 1e-7f)
            << r << "," << c;
      }
  }
  // A checkpoint's FP8 weights whose blocks reach 448 come back with the same bytes.
  std::vector<float> ckpt(rows * cols);
  for (size_t i = 0; i < ckpt.size(); ++i) ckpt[i] = F8E4M3ToFloat(q.values[i]) * 0.125f;
  const Fp8Blocks again = QuantizeFp8Blocks(ckpt, rows, cols, block);
  for (size_t i = 0; i < ckpt.size(); ++i) {
    if (i / cols >= 4 && i % cols >= 4) continue;  // the zero block (scale 1 either way)
    EXPECT_EQ(again.values[i], q.values[i]) << i;
  }
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
