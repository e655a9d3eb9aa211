// The bf16 decode GEMV (plain, SiLU-and-mul, several weights in one launch, added into its
// output) against float64 products over the same bf16-rounded weights. Row lengths run from one
// warp per feature group to the 8-warp split of long rows (k = 264, 4104, 8200 and 16392: 1, 2, 4
// and 8 warps with the planner's minimum of 8 loads per lane); each is 8 columns past a multiple of
// 256, so the lanes of a row end on unequal numbers of loads.
#include "kernels/gemv.h"

#include <cmath>
#include <memory>

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

// out[r, o] = x[r] . w[o] in float64 over bf16-rounded w [n, k].
std::vector<double> Product(const std::vector<float>& x, int rows, const std::vector<float>& w,
                            int n, int k) {
  std::vector<double> out(size_t(rows) * n);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < n; ++o) {
      double s = 0;
      for (int i = 0; i < k; ++i)
        s += double{x[size_t(r) * k + i]} * RoundBf16(w[size_t(o) * k + i]);
      out[size_t(r) * n + o] = s;
    }
  return out;
}

constexpr int kLengths[] = {264, 4096 + 8, 8192 + 8, 16384 + 8};

TEST(GemvTest, Bf16MatchesTheProductForEveryRowSplit) {
  SPARK_SKIP_WITHOUT_GPU();
  const int n = 37;
  for (int k : kLengths) {
    const auto w = Random(size_t(n) * k, k);
    DeviceArray<__nv_bfloat16> dw(ToBf16(w));
    for (int rows = 1; rows <= kGemvMaxRows; ++rows) {
      SCOPED_TRACE(::testing::Message() << "k " << k << ", rows " << rows);
      const auto x = Random(size_t(rows) * k, 100 + rows);
      DeviceArray<float> dx(x), dout(size_t(rows) * n);
      SPARK_ASSERT_OK(GemvBf16(dx.get(), rows, k, dw.get(), n, dout.get(), nullptr));
      EXPECT_LT(RelMax(dout.Host(), Product(x, rows, w, n, k)), 1e-5);
    }
  }
}

TEST(GemvTest, Bf16SiluMulTakesGateAndUpRowsForEveryRowSplit) {
  SPARK_SKIP_WITHOUT_GPU();
  const int inter = 21, rows = 3;
  for (int k : kLengths) {
    SCOPED_TRACE(k);
    const auto w = Random(size_t(2 * inter) * k, 7 * k);
    const auto x = Random(size_t(rows) * k, 200);
    DeviceArray<__nv_bfloat16> dw(ToBf16(w));
    DeviceArray<float> dx(x), dact(size_t(rows) * inter);
    SPARK_ASSERT_OK(GemvBf16SiluMul(dx.get(), rows, k, dw.get(), inter, dact.get(), nullptr));
    const auto gu = Product(x, rows, w, 2 * inter, k);
    std::vector<double> want(size_t(rows) * inter);
    for (int r = 0; r < rows; ++r)
      for (int f = 0; f < inter; ++f) {
        const double g = gu[size_t(r) * 2 * inter + f], u = gu[size_t(r) * 2 * inter + inter + f];
        want[size_t(r) * inter + f] = g / (1.0 + std::exp(-g)) * u;
      }
    EXPECT_LT(RelMax(dact.Host(), want), 1e-5);
  }
}

// out += x w^T: the residual add of an output projection.
TEST(GemvTest, Bf16AccumulateAddsIntoTheOutput) {
  SPARK_SKIP_WITHOUT_GPU();
  const int n = 29;
  for (int k : kLengths) {
    for (int rows : {1, kGemvMaxRows}) {
      SCOPED_TRACE(::testing::Message() << "k " << k << ", rows " << rows);
      const auto w = Random(size_t(n) * k, k + 5);
      const auto x = Random(size_t(rows) * k, 600 + rows);
      const auto before = Random(size_t(rows) * n, 700 + rows, 4.0f);
      DeviceArray<__nv_bfloat16> dw(ToBf16(w));
      DeviceArray<float> dx(x), dout(before);
      GemvSegments segs;
      segs.count = 1;
      segs.w[0] = dw.get();
      segs.out[0] = dout.get();
      segs.n[0] = n;
      segs.accumulate = true;
      SPARK_ASSERT_OK(GemvBf16Many(dx.get(), rows, k, segs, nullptr));
      auto want = Product(x, rows, w, n, k);
      for (size_t i = 0; i < want.size(); ++i) want[i] += before[i];
      EXPECT_LT(RelMax(dout.Host(), want), 1e-5);
    }
  }
}

// Segments of a launch meet inside a block whenever a block holds more than one feature group.
TEST(GemvTest, Bf16ManyKeepsEachWeightsOutputsForEveryRowSplit) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 2, n[] = {19, 5, 6};
  for (int k : kLengths) {
    SCOPED_TRACE(k);
    const auto x = Random(size_t(rows) * k, 300);
    DeviceArray<float> dx(x);
    std::vector<std::vector<float>> ws;
    std::vector<std::unique_ptr<DeviceArray<__nv_bfloat16>>> dws;
    std::vector<std::unique_ptr<DeviceArray<float>>> outs;
    GemvSegments segs;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(Random(size_t(n[i]) * k, 310 + i));
      dws.push_back(std::make_unique<DeviceArray<__nv_bfloat16>>(ToBf16(ws.back())));
      outs.push_back(std::make_unique<DeviceArray<float>>(size_t(rows) * n[i]));
      segs.w[segs.count] = dws.back()->get();
      segs.out[segs.count] = outs.back()->get();
      segs.n[segs.count++] = n[i];
    }
    SPARK_ASSERT_OK(GemvBf16Many(dx.get(), rows, k, segs, nullptr));
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(i);
      EXPECT_LT(RelMax(outs[i]->Host(), Product(x, rows, ws[i], n[i], k)), 1e-5);
    }
  }
}

}  // namespace
}  // namespace spark::kernels
