// RMSNorm kernels against a float64 reference: fp32 within 1e-5 relative (L2), bf16 within 1e-2
// of the reference computed from the same bf16-rounded inputs.
#include "kernels/norm.h"

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

// want = norm(x + residual) * w; the new residual is x + residual.
void Reference(const std::vector<float>& x, const std::vector<float>* residual,
               const std::vector<float>& w, int rows, int dim, float eps, std::vector<double>* out,
               std::vector<double>* sum) {
  out->assign(rows * dim, 0);
  sum->assign(rows * dim, 0);
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) {
      const double v = double{x[r * dim + i]} + (residual ? (*residual)[r * dim + i] : 0.0);
      (*sum)[r * dim + i] = v;
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) (*out)[r * dim + i] = (*sum)[r * dim + i] * inv * w[i];
  }
}

class RmsNormTest : public ::testing::TestWithParam<int> {};

TEST_P(RmsNormTest, Fp32PlainAndFusedResidual) {
  SPARK_SKIP_WITHOUT_GPU();
  const int dim = GetParam(), rows = 7;
  const auto x = Random(rows * dim, 1), res = Random(rows * dim, 2), w = Random(dim, 3);
  std::vector<double> want, want_sum;
  for (bool fused : {false, true}) {
    DeviceArray<float> dx(x), dres(res), dw(w), dout(rows * dim);
    SPARK_ASSERT_OK(RmsNorm<float>(dx.get(), fused ? dres.get() : nullptr, dw.get(), rows, dim,
                                   1e-6f, dout.get(), nullptr));
    Reference(x, fused ? &res : nullptr, w, rows, dim, 1e-6f, &want, &want_sum);
    EXPECT_LT(RelL2(dout.Host(), want), 1e-5) << "dim " << dim << " fused " << fused;
    if (fused) {
      EXPECT_LT(RelL2(dres.Host(), want_sum), 1e-6);
    }
  }
}

TEST_P(RmsNormTest, Bf16FusedResidual) {
  SPARK_SKIP_WITHOUT_GPU();
  const int dim = GetParam(), rows = 5;
  auto x = Random(rows * dim, 4), res = Random(rows * dim, 5), w = Random(dim, 6);
  for (auto* v : {&x, &res, &w})
    for (float& f : *v) f = RoundBf16(f);
  DeviceArray<__nv_bfloat16> dx(ToBf16(x)), dres(ToBf16(res)), dw(ToBf16(w)), dout(rows * dim);
  SPARK_ASSERT_OK(RmsNorm<__nv_bfloat16>(dx.get(), dres.get(), dw.get(), rows, dim, 1e-6f,
                                         dout.get(), nullptr));
  std::vector<double> want, want_sum;
  Reference(x, &res, w, rows, dim, 1e-6f, &want, &want_sum);
  EXPECT_LT(RelL2(ToFloat(dout.Host()), want), 1e-2);
  EXPECT_LT(RelL2(ToFloat(dres.Host()), want_sum), 5e-3);
}

// The bf16 copy for a following bf16 GEMM is the fp32 output rounded (vector and scalar rows).
TEST_P(RmsNormTest, Bf16CopyOfTheFp32Output) {
  SPARK_SKIP_WITHOUT_GPU();
  const int dim = GetParam(), rows = 5;
  const auto x = Random(rows * dim, 4), res = Random(rows * dim, 5), w = Random(dim, 6);
  DeviceArray<float> dx(x), dres(res), dw(w), dout(rows * dim);
  DeviceArray<__nv_bfloat16> dcopy(rows * dim);
  SPARK_ASSERT_OK(RmsNorm<float>(dx.get(), dres.get(), dw.get(), rows, dim, 1e-6f, dout.get(),
                                 nullptr, dcopy.get()));
  std::vector<double> want, want_sum;
  Reference(x, &res, w, rows, dim, 1e-6f, &want, &want_sum);
  const std::vector<float> out = dout.Host();
  EXPECT_LT(RelL2(out, want), 1e-5) << "dim " << dim;
  const std::vector<float> copy = ToFloat(dcopy.Host());
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(copy[i], RoundBf16(out[i])) << "dim " << dim << " element " << i;
  }
}

// 16 and 4096 take the vector path, 37 and 1001 the scalar one, 8192 uses 1024 threads x 2.
INSTANTIATE_TEST_SUITE_P(Dims, RmsNormTest, ::testing::Values(16, 37, 1001, 4096, 8192));

TEST(RmsNormTest, InPlaceOutput) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 3, dim = 128;
  const auto x = Random(rows * dim, 7), w = Random(dim, 8);
  DeviceArray<float> dx(x), dw(w);
  SPARK_ASSERT_OK(RmsNorm<float>(dx.get(), nullptr, dw.get(), rows, dim, 1e-5f, dx.get(), nullptr));
  std::vector<double> want, sum;
  Reference(x, nullptr, w, rows, dim, 1e-5f, &want, &sum);
  EXPECT_LT(RelL2(dx.Host(), want), 1e-5);
}

}  // namespace
}  // namespace spark::kernels
