// Mat (deepseek_v4/matrix.h): the released FP8 / FP4 bytes packed for the backend decode to the
// values block_quant.h's dequantisation gives, and every slice and stack either stays packed
// (where the 32-wide scale blocks allow) or falls back to the same fp32 values. The loader keeps
// the release fixture's matrices packed when asked and decodes to what Float reads.
#include <gtest/gtest.h>

#include <random>

#include "engine/core/block_quant.h"
#include "engine/model/deepseek_v4/matrix.h"
#include "engine/model/deepseek_v4/tensor_loader.h"
#include "engine/model/deepseek_v41/weight_names.h"

namespace spark::engine::model::dsv4 {
namespace {

using backend::DType;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, int lo = 0, int hi = 255) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) {
    b = static_cast<uint8_t>(d(rng));
    if (lo == 0 && (b & 0x7F) == 0x7F) b ^= 1;  // no E4M3 NaN codes
  }
  return v;
}

Vec Fp8Reference(const std::vector<uint8_t>& codes, int64_t rows, int64_t cols,
                 const std::vector<uint8_t>& scales, int64_t block) {
  Vec s(scales.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = core::E8M0ToFloat(scales[i]);
  auto v = core::DequantFp8Blocks(codes, rows, cols, s, {block, block}, "w");
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? *v : Vec();
}

Vec Rows(const Vec& v, int64_t cols, int64_t begin, int64_t count) {
  return Vec(v.begin() + begin * cols, v.begin() + (begin + count) * cols);
}

Vec Cols(const Vec& v, int64_t rows, int64_t cols, int64_t begin, int64_t count) {
  Vec out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), v.begin() + r * cols + begin, v.begin() + r * cols + begin + count);
  }
  return out;
}

TEST(DeepseekMatrixTest, E4M3DecodesAsBlockQuantAtEveryBlockSize) {
  const int64_t rows = 96, cols = 160;
  const std::vector<uint8_t> codes = RandomBytes(rows * cols, 1);
  for (int64_t block : {32, 64, 128}) {
    const int64_t sr = (rows + block - 1) / block, sc = (cols + block - 1) / block;
    const std::vector<uint8_t> scales = RandomBytes(sr * sc, 2, 110, 135);
    const Mat m = PackE4M3(codes.data(), rows, cols, scales.data(), block);
    EXPECT_EQ(m.dtype, DType::kE4M3B32);
    EXPECT_EQ(m.packed.size(), backend::MatrixBytes(rows, cols, DType::kE4M3B32));
    EXPECT_EQ(Decoded(m), Fp8Reference(codes, rows, cols, scales, block)) << "block " << block;
  }
}

TEST(DeepseekMatrixTest, E4M3SlicesStayPackedOnBlockBoundariesAndDecodeAlike) {
  const int64_t rows = 96, cols = 128;
  const std::vector<uint8_t> codes = RandomBytes(rows * cols, 3);
  const std::vector<uint8_t> scales = RandomBytes(3 * 4, 4, 100, 140);
  const Mat m = PackE4M3(codes.data(), rows, cols, scales.data(), 32);
  const Vec all = Decoded(m);
  const Mat rows_on = SliceRows(m, {32, 48});
  EXPECT_TRUE(rows_on.quantised());
  EXPECT_EQ(Decoded(rows_on), Rows(all, cols, 32, 48));
  const Mat rows_off = SliceRows(m, {16, 40});
  EXPECT_FALSE(rows_off.quantised());
  EXPECT_EQ(Decoded(rows_off), Rows(all, cols, 16, 40));
  const Mat cols_on = SliceCols(m, {32, 64});
  EXPECT_TRUE(cols_on.quantised());
  EXPECT_EQ(Decoded(cols_on), Cols(all, rows, cols, 32, 64));
  const Mat cols_tail = SliceCols(m, {96, 32});
  EXPECT_TRUE(cols_tail.quantised());
  EXPECT_EQ(Decoded(cols_tail), Cols(all, rows, cols, 96, 32));
  const Mat cols_part = SliceCols(m, {64, 48});  // ends inside a block: floats
  EXPECT_FALSE(cols_part.quantised());
  EXPECT_EQ(Decoded(cols_part), Cols(all, rows, cols, 64, 48));
  const Mat cols_off = SliceCols(m, {16, 32});
  EXPECT_FALSE(cols_off.quantised());
  EXPECT_EQ(Decoded(cols_off), Cols(all, rows, cols, 16, 32));
  Vec both = Rows(all, cols, 0, 32);
  const Vec tail = Rows(all, cols, 64, 32);
  both.insert(both.end(), tail.begin(), tail.end());
  const Mat stacked = StackRows(SliceRows(m, {0, 32}), SliceRows(m, {64, 32}));
  EXPECT_TRUE(stacked.quantised());
  EXPECT_EQ(Decoded(stacked), both);
  const Mat ragged = StackRows(rows_off, SliceRows(m, {0, 32}));  // floats + packed
  EXPECT_FALSE(ragged.quantised());
  EXPECT_EQ(ragged.rows, 72);
}

TEST(DeepseekMatrixTest, E2M1DecodesAsDequantFp4AndSlices) {
  const int64_t rows = 40, cols = 96;
  const std::vector<uint8_t> packed = RandomBytes(rows * cols / 2, 5);
  const std::vector<uint8_t> scales = RandomBytes(rows * cols / 32, 6, 110, 130);
  const Mat m = PackE2M1(packed.data(), rows, cols, scales.data());
  auto want = core::DequantFp4(packed, rows, cols, scales, "w");
  ASSERT_TRUE(want.ok());
  const Vec all = Decoded(m);
  EXPECT_EQ(all, *want);
  const Mat r = SliceRows(m, {7, 13});  // per-row scales: any row stays packed
  EXPECT_TRUE(r.quantised());
  EXPECT_EQ(Decoded(r), Rows(all, cols, 7, 13));
  const Mat c = SliceCols(m, {32, 64});
  EXPECT_TRUE(c.quantised());
  EXPECT_EQ(Decoded(c), Cols(all, rows, cols, 32, 64));
  const Mat off = SliceCols(m, {16, 32});
  EXPECT_FALSE(off.quantised());
  EXPECT_EQ(Decoded(off), Cols(all, rows, cols, 16, 32));
  // Aligned but part of a block (a tensor-parallel share of 16 channels): floats, so that the
  // products never see a k of part of a block; a matrix's own ragged end stays packed.
  const Mat part = SliceCols(m, {0, 16});
  EXPECT_FALSE(part.quantised());
  EXPECT_EQ(Decoded(part), Cols(all, rows, cols, 0, 16));
  const Mat stacked = StackRows(r, SliceRows(m, {0, 3}));
  EXPECT_TRUE(stacked.quantised());
  Vec both = Rows(all, cols, 7, 13);
  const Vec head = Rows(all, cols, 0, 3);
  both.insert(both.end(), head.begin(), head.end());
  EXPECT_EQ(Decoded(stacked), both);
}

TEST(DeepseekMatrixTest, LoaderKeepsTheReleaseFixturePackedAndDecodesAsFloat) {
  auto source = TensorSource::Open(std::string(SPARK_SOURCE_DIR) +
                                   "/tests/fixtures/models/deepseek-v41-tiny/release");
  ASSERT_TRUE(source.ok()) << source.status().message();
  Loader keep(**source, {}, dsv41::V41Naming(), WeightTypes::For(DType::kFP8));
  Loader plain(**source, {}, dsv41::V41Naming());
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    DType want;
  };
  for (const Case& c : {Case{"layers.1.attn.wq_a.weight", {32, 64}, DType::kE4M3B32},
                        Case{"layers.1.attn.wo_b.weight", {64, 32}, DType::kE4M3B32},
                        Case{"layers.1.ffn.experts.3.w1.weight", {32, 64}, DType::kE2M1B32},
                        Case{"layers.1.ffn.experts.3.w2.weight", {64, 32}, DType::kE2M1B32},
                        Case{"layers.1.ffn.gate.weight", {8, 64}, DType::kF32}}) {
    auto m = keep.Matrix(c.name, c.shape);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.status().message();
    EXPECT_EQ(m->dtype, c.want) << c.name;
    auto f = plain.Float(c.name, c.shape);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(Decoded(*m), *f) << c.name;
  }
  auto floats = plain.Matrix("layers.1.attn.wq_a.weight", {32, 64});
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(floats->dtype, DType::kF32) << "fp32 WeightTypes decode at load";
}

}  // namespace
}  // namespace spark::engine::model::dsv4
