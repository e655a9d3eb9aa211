// cuBLASLt GEMMs against a float64 host product: fp32 within 1e-5 relative (L2), bf16 inputs
// within 1e-2 of the product of the same rounded inputs (fp32 and bf16 outputs).
#include "kernels/gemm.h"

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

std::vector<double> Product(const std::vector<float>& x, const std::vector<float>& w, int m, int n,
                            int k) {
  std::vector<double> out(size_t{static_cast<size_t>(m)} * n);
  for (int r = 0; r < m; ++r)
    for (int o = 0; o < n; ++o) {
      double s = 0;
      for (int i = 0; i < k; ++i) s += double{x[r * k + i]} * w[o * k + i];
      out[r * n + o] = s;
    }
  return out;
}

struct Shape {
  int m, n, k;
};

class GemmTest : public ::testing::TestWithParam<Shape> {};

TEST_P(GemmTest, Fp32AndBf16) {
  SPARK_SKIP_WITHOUT_GPU();
  const Shape s = GetParam();
  auto gemm = Gemm::Create({});
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  auto x = Random(size_t{static_cast<size_t>(s.m)} * s.k, 61),
       w = Random(size_t{static_cast<size_t>(s.n)} * s.k, 62);
  DeviceArray<float> dx(x), dw(w), dout(size_t{static_cast<size_t>(s.m)} * s.n);
  SPARK_ASSERT_OK((*gemm)->Run(GemmType::kF32, GemmType::kF32, dx.get(), s.m, s.k, dw.get(), s.n,
                               dout.get(), nullptr));
  EXPECT_LT(RelL2(dout.Host(), Product(x, w, s.m, s.n, s.k)), 1e-5);
  for (auto* v : {&x, &w})
    for (float& f : *v) f = RoundBf16(f);
  const auto want = Product(x, w, s.m, s.n, s.k);
  DeviceArray<__nv_bfloat16> bx(ToBf16(x)), bw(ToBf16(w)),
      bout(size_t{static_cast<size_t>(s.m)} * s.n);
  SPARK_ASSERT_OK((*gemm)->Run(GemmType::kBF16, GemmType::kF32, bx.get(), s.m, s.k, bw.get(), s.n,
                               dout.get(), nullptr));
  EXPECT_LT(RelL2(dout.Host(), want), 1e-4);  // fp32 accumulate, fp32 out
  SPARK_ASSERT_OK((*gemm)->Run(GemmType::kBF16, GemmType::kBF16, bx.get(), s.m, s.k, bw.get(), s.n,
                               bout.get(), nullptr));
  EXPECT_LT(RelL2(ToFloat(bout.Host()), want), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Values(Shape{1, 301, 64}, Shape{7, 128, 64},
                                           Shape{33, 1000, 257}, Shape{256, 512, 1024}));

TEST(GemmTest, RejectsFp32InputWithBf16Output) {
  SPARK_SKIP_WITHOUT_GPU();
  auto gemm = Gemm::Create({});
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ((*gemm)
                ->Run(GemmType::kF32, GemmType::kBF16, nullptr, 1, 1, nullptr, 1, nullptr, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::kernels
