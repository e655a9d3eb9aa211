// FP8 (E4M3, 128 x 128 block scales) kernels against float64 host references: the decode GEMV
// (plain, SiLU-and-mul, several weights in one launch), the widening to bf16, the activations'
// 1 x 128 quantisation and cuBLASLt's block-scaled FP8 GEMM. Shapes leave
// partial blocks in both dimensions; random codes cover the whole E4M3 range but NaN.
#include "kernels/fp8.h"

#include <cuda_fp8.h>

#include <utility>

#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

// An E4M3 matrix [n, k] with its scales, and the values it stands for.
struct Fp8Matrix {
  int n = 0, k = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // [ceil(n / 128), ceil(k / 128)]
  std::vector<double> values;
};

// E4M3 by its definition: sign, 4 exponent bits (bias 7), 3 mantissa bits.
double Fp8Value(uint8_t code) {
  const int e = (code >> 3) & 0xF, f = code & 7;
  const double mag = e == 0 ? std::ldexp(f / 8.0, -6) : std::ldexp(1.0 + f / 8.0, e - 7);
  return code & 0x80 ? -mag : mag;
}

Fp8Matrix RandomFp8(int n, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp8Matrix m{n, k};
  const int sr = (n + 127) / 128, sc = (k + 127) / 128;
  std::uniform_real_distribution<float> scale(1e-3f, 4e-3f);
  for (int i = 0; i < sr * sc; ++i) m.scales.push_back(scale(rng));
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < k; ++c) {
      uint8_t code;
      do code = static_cast<uint8_t>(rng() & 0xFF);
      while ((code & 0x7F) == 0x7F);  // NaN
      m.codes.push_back(code);
      m.values.push_back(Fp8Value(code) * m.scales[(r / 128) * sc + c / 128]);
    }
  return m;
}

// out[r, o] = x[r] . w[o] in float64.
std::vector<double> Product(const std::vector<float>& x, int rows, const Fp8Matrix& w) {
  std::vector<double> out(static_cast<size_t>(rows) * w.n);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < w.n; ++o) {
      double s = 0;
      for (int i = 0; i < w.k; ++i) s += double{x[r * w.k + i]} * w.values[size_t(o) * w.k + i];
      out[size_t(r) * w.n + o] = s;
    }
  return out;
}

// 300 x 272: 3 x 3 blocks, the last ones partial. 37 rows of k = 8208, 16400 and 32784: split
// over 2, 4 and 8 warps per feature group (the planner's minimum of 8 loads per lane), the last
// 16 columns a partial scale block.
TEST(Fp8Test, GemvMatchesTheBlockScaledProduct) {
  SPARK_SKIP_WITHOUT_GPU();
  for (const auto& [n, k] : {std::pair{300, 272}, std::pair{37, 8192 + 16},
                             std::pair{37, 16384 + 16}, std::pair{37, 32768 + 16}}) {
    const Fp8Matrix w = RandomFp8(n, k, 71 + k);
    DeviceArray<uint8_t> dw(w.codes);
    DeviceArray<float> ds(w.scales);
    for (int rows = 1; rows <= kGemvMaxRows; ++rows) {
      SCOPED_TRACE(::testing::Message() << "k " << k << ", rows " << rows);
      const auto x = Random(size_t(rows) * w.k, 72 + rows);
      DeviceArray<float> dx(x), dout(size_t(rows) * w.n);
      SPARK_ASSERT_OK(GemvFp8(dx.get(), rows, w.k, dw.get(), ds.get(), w.n, dout.get(), nullptr));
      EXPECT_LT(RelMax(dout.Host(), Product(x, rows, w)), 1e-5);
    }
  }
}

// 200 features: up rows start inside block row 1; 20 features over k = 32784: 8 warps a group.
TEST(Fp8Test, GemvSiluMulTakesGateAndUpRowsFromOneGrid) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 3;
  for (const auto& [inter, k] : {std::pair{200, 144}, std::pair{20, 32768 + 16}}) {
    SCOPED_TRACE(k);
    const Fp8Matrix w = RandomFp8(2 * inter, k, 81);
    const auto x = Random(size_t(rows) * w.k, 82);
    DeviceArray<uint8_t> dw(w.codes);
    DeviceArray<float> ds(w.scales), dx(x), dact(size_t(rows) * inter);
    SPARK_ASSERT_OK(
        GemvFp8SiluMul(dx.get(), rows, w.k, dw.get(), ds.get(), inter, dact.get(), nullptr));
    const auto gu = Product(x, rows, w);
    std::vector<double> want(size_t(rows) * inter);
    for (int r = 0; r < rows; ++r)
      for (int f = 0; f < inter; ++f) {
        const double g = gu[size_t(r) * w.n + f], u = gu[size_t(r) * w.n + inter + f];
        want[size_t(r) * inter + f] = g / (1.0 + std::exp(-g)) * u;
      }
    EXPECT_LT(RelMax(dact.Host(), want), 1e-5);
  }
}

TEST(Fp8Test, GemvManyKeepsEachWeightsScales) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 2, k = 128;
  const Fp8Matrix q = RandomFp8(64, k, 91), kk = RandomFp8(32, k, 92), v = RandomFp8(32, k, 93);
  const auto x = Random(size_t(rows) * k, 94);
  DeviceArray<float> dx(x);
  const Fp8Matrix* ws[] = {&q, &kk, &v};
  std::vector<std::unique_ptr<DeviceArray<uint8_t>>> codes;
  std::vector<std::unique_ptr<DeviceArray<float>>> scales, outs;
  GemvSegments segs;
  for (const Fp8Matrix* w : ws) {
    codes.push_back(std::make_unique<DeviceArray<uint8_t>>(w->codes));
    scales.push_back(std::make_unique<DeviceArray<float>>(w->scales));
    outs.push_back(std::make_unique<DeviceArray<float>>(size_t(rows) * w->n));
    segs.w[segs.count] = codes.back()->get();
    segs.scales[segs.count] = scales.back()->get();
    segs.out[segs.count] = outs.back()->get();
    segs.n[segs.count++] = w->n;
  }
  SPARK_ASSERT_OK(GemvFp8Many(dx.get(), rows, k, segs, nullptr));
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(RelMax(outs[i]->Host(), Product(x, rows, *ws[i])), 1e-5);
  }
}

// out += x w^T with fp8 weights (the residual add of an output projection), one row and four.
TEST(Fp8Test, GemvAccumulateAddsIntoTheOutput) {
  SPARK_SKIP_WITHOUT_GPU();
  const int k = 4096, n = 96;
  const Fp8Matrix w = RandomFp8(n, k, 101);
  DeviceArray<uint8_t> dw(w.codes);
  DeviceArray<float> ds(w.scales);
  for (int rows : {1, kGemvMaxRows}) {
    SCOPED_TRACE(rows);
    const auto x = Random(size_t(rows) * k, 103 + rows);
    const auto before = Random(size_t(rows) * n, 105 + rows, 4.0f);
    DeviceArray<float> dx(x), dout(before);
    GemvSegments segs;
    segs.count = 1;
    segs.w[0] = dw.get();
    segs.scales[0] = ds.get();
    segs.out[0] = dout.get();
    segs.n[0] = n;
    segs.accumulate = true;
    SPARK_ASSERT_OK(GemvFp8Many(dx.get(), rows, k, segs, nullptr));
    auto want = Product(x, rows, w);
    for (size_t i = 0; i < want.size(); ++i) want[i] += before[i];
    EXPECT_LT(RelMax(dout.Host(), want), 1e-5);
  }
}

TEST(Fp8Test, GemvRejectsKNotAMultipleOf16) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_EQ(GemvFp8(nullptr, 1, 24, nullptr, nullptr, 8, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(Fp8Test, DequantToBf16RoundsEachValue) {
  SPARK_SKIP_WITHOUT_GPU();
  const Fp8Matrix w = RandomFp8(130, 160, 101);
  DeviceArray<uint8_t> dw(w.codes);
  DeviceArray<float> ds(w.scales);
  DeviceArray<__nv_bfloat16> dout(w.codes.size());
  SPARK_ASSERT_OK(DequantFp8ToBf16(dw.get(), ds.get(), w.n, w.k, dout.get(), nullptr));
  const auto got = ToFloat(dout.Host());
  for (size_t i = 0; i < got.size(); ++i) {
    // value * scale rounded to fp32 (as the kernel multiplies), then to bf16.
    ASSERT_EQ(got[i], RoundBf16(static_cast<float>(w.values[i]))) << i;
  }
}

// Activations for the FP8 GEMM: each 1 x 128 block scaled to its maximum (448), every code the
// nearest E4M3 value of x / scale, the scales laid out block-major ([k / 128, m]).
TEST(Fp8Test, QuantizeRowsScalesEachBlockOfARow) {
  SPARK_SKIP_WITHOUT_GPU();
  const int m = 3, k = 256;
  auto x = Random(size_t(m) * k, 111);
  for (int c = 128; c < 256; ++c) x[size_t(2) * k + c] = 0.0f;  // row 2, block 1: all zero
  DeviceArray<float> dx(x), dscales(size_t(m) * 2);
  DeviceArray<uint8_t> dcodes(x.size());
  SPARK_ASSERT_OK(QuantizeRowsFp8(dx.get(), m, k, dcodes.get(), dscales.get(), m, nullptr));
  const auto codes = dcodes.Host();
  const auto scales = dscales.Host();
  for (int r = 0; r < m; ++r)
    for (int kb = 0; kb < 2; ++kb) {
      float amax = 0.0f;
      for (int c = 0; c < 128; ++c)
        amax = std::max(amax, std::fabs(x[size_t(r) * k + kb * 128 + c]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      ASSERT_EQ(scales[size_t(kb) * m + r], scale) << r << "," << kb;
      for (int c = 0; c < 128; ++c) {
        const size_t i = size_t(r) * k + kb * 128 + c;
        const __nv_fp8_e4m3 want(x[i] / scale);
        ASSERT_EQ(codes[i], want.__x) << r << "," << c;
      }
    }
}

// cuBLASLt's block-scaled FP8 GEMM (Hopper) against the float64 product of the same codes and
// scales; other GPUs report it unsupported.
TEST(Fp8Test, BlockScaledGemmMatchesTheProductOfItsOperands) {
  SPARK_SKIP_WITHOUT_GPU();
  auto gemm = Gemm::Create({});
  ASSERT_TRUE(gemm.ok());
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const int n = 384, k = 1024;
  if (prop.major != 9) {
    EXPECT_FALSE((*gemm)->SupportsFp8(16, n, k));
    GTEST_SKIP() << "block-scaled FP8 GEMMs are Hopper's; " << prop.name << " widens to bf16";
  }
  EXPECT_FALSE((*gemm)->SupportsFp8(16, n, 1000));  // k not a multiple of 512
  const Fp8Matrix w = RandomFp8(n, k, 121);
  DeviceArray<uint8_t> dw(w.codes);
  DeviceArray<float> ds(w.scales);
  EXPECT_FALSE((*gemm)->SupportsFp8(5, n, k));  // m not a multiple of 16: the caller pads
  for (int m : {16, 32, 208}) {
    SCOPED_TRACE(m);
    const Status supported = (*gemm)->CheckFp8(m, n, k);
    ASSERT_TRUE(supported.ok()) << supported.message();
    const auto x = Random(size_t(m) * k, 122 + m);
    DeviceArray<float> dx(x), dxs(size_t(m) * (k / 128)), dout(size_t(m) * n);
    DeviceArray<uint8_t> dxq(x.size());
    SPARK_ASSERT_OK(QuantizeRowsFp8(dx.get(), m, k, dxq.get(), dxs.get(), m, nullptr));
    SPARK_ASSERT_OK(
        (*gemm)->RunFp8(dxq.get(), dxs.get(), m, k, dw.get(), ds.get(), n, dout.get(), nullptr));
    // The product of what the GEMM was given: the activations' codes times their scales.
    const auto xq = dxq.Host();
    const auto xs = dxs.Host();
    std::vector<float> xv(x.size());
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < k; ++c) {
        const uint8_t code = xq[size_t(r) * k + c];
        xv[size_t(r) * k + c] = static_cast<float>(Fp8Value(code)) * xs[size_t(c / 128) * m + r];
      }
    EXPECT_LT(RelL2(dout.Host(), Product(xv, m, w)), 2e-3);
  }
}

}  // namespace
}  // namespace spark::kernels
