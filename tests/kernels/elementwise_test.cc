// SiLU-and-mul, residual add, dtype casts and the vocabulary-parallel embedding lookup against
// plain host loops: fp32 within 1e-6 relative, bf16 within 1e-2.
#include "kernels/elementwise.h"

#include "kernels/activation.h"
#include "kernels/embedding.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

std::vector<double> SiluMulReference(const std::vector<float>& gu, int rows, int inter) {
  std::vector<double> out(rows * inter);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < inter; ++i) {
      const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
      out[r * inter + i] = g / (1 + std::exp(-g)) * u;
    }
  return out;
}

TEST(SiluMulTest, Fp32AndBf16) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 6, inter = 333;
  auto gu = Random(rows * 2 * inter, 21, 3.0f);
  DeviceArray<float> dgu(gu), dout(rows * inter);
  SPARK_ASSERT_OK(SiluMul<float>(dgu.get(), rows, inter, dout.get(), nullptr));
  EXPECT_LT(RelL2(dout.Host(), SiluMulReference(gu, rows, inter)), 1e-6);
  for (float& f : gu) f = RoundBf16(f);
  DeviceArray<__nv_bfloat16> bgu(ToBf16(gu)), bout(rows * inter);
  SPARK_ASSERT_OK(SiluMul<__nv_bfloat16>(bgu.get(), rows, inter, bout.get(), nullptr));
  EXPECT_LT(RelL2(ToFloat(bout.Host()), SiluMulReference(gu, rows, inter)), 1e-2);
}

// The bf16 copy for a following bf16 GEMM is the fp32 result rounded, on the row-wise kernel
// (inter % 4 == 0) and the element-wise one.
TEST(SiluMulTest, Bf16CopyOfTheFp32Result) {
  SPARK_SKIP_WITHOUT_GPU();
  for (const int inter : {332, 333, 12288}) {
    const int rows = inter == 12288 ? 33 : 5;
    const auto gu = Random(rows * 2 * inter, 24, 3.0f);
    DeviceArray<float> dgu(gu), dout(rows * inter);
    DeviceArray<__nv_bfloat16> dcopy(rows * inter);
    SPARK_ASSERT_OK(SiluMul<float>(dgu.get(), rows, inter, dout.get(), nullptr, dcopy.get()));
    const std::vector<float> out = dout.Host();
    EXPECT_LT(RelL2(out, SiluMulReference(gu, rows, inter)), 1e-6) << "inter " << inter;
    const std::vector<float> copy = ToFloat(dcopy.Host());
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(copy[i], RoundBf16(out[i])) << "inter " << inter << " element " << i;
    }
  }
}

TEST(AddTest, AddsAndCastsRoundTrip) {
  SPARK_SKIP_WITHOUT_GPU();
  const size_t n = 100003;
  const auto x = Random(n, 22), y = Random(n, 23);
  DeviceArray<float> dx(x), dy(y);
  SPARK_ASSERT_OK(Add<float>(dx.get(), dy.get(), n, nullptr));
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = double{x[i]} + y[i];
  EXPECT_LT(RelL2(dx.Host(), want), 1e-7);
  DeviceArray<__nv_bfloat16> b(n);
  DeviceArray<float> back(n);
  SPARK_ASSERT_OK(CastF32ToBf16(dy.get(), n, b.get(), nullptr));
  SPARK_ASSERT_OK(CastBf16ToF32(b.get(), n, back.get(), nullptr));
  const auto got = back.Host();
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(got[i], RoundBf16(y[i])) << i;
}

TEST(EmbeddingTest, VocabularyShardZeroesOtherRanksRows) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 50, hidden = 96;
  const int64_t row_begin = 100;  // this shard holds ids [100, 150)
  const auto table = Random(rows * hidden, 24);
  const std::vector<int32_t> ids = {100, 149, 99, 150, 0, 123, 123};
  DeviceArray<float> dtable(table), dout(ids.size() * hidden);
  DeviceArray<int32_t> dids(ids);
  SPARK_ASSERT_OK(Embedding<float>(dtable.get(), row_begin, rows, hidden, dids.get(),
                                   static_cast<int64_t>(ids.size()), dout.get(), nullptr));
  const auto got = dout.Host();
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t row = ids[t] - row_begin;
    for (int i = 0; i < hidden; ++i) {
      const float want = (row >= 0 && row < rows) ? table[row * hidden + i] : 0.0f;
      ASSERT_EQ(got[t * hidden + i], want) << "token " << t << " element " << i;
    }
  }
}

}  // namespace
}  // namespace spark::kernels
