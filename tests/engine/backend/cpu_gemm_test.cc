// GemmTile and CpuBackend::Linear: every output equals Dot of its rows bit for bit, over shapes
// that hit every register-block remainder and input lengths with and without a tail, and the
// result does not depend on the thread count.
#include "engine/backend/cpu/cpu_gemm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"

namespace spark::engine::backend::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

struct GemmCase {
  int64_t rows;
  int in;
  int out;
};

class CpuGemmTest : public testing::TestWithParam<GemmCase> {};

TEST_P(CpuGemmTest, TileEqualsDotBitForBit) {
  const GemmCase c = GetParam();
  const auto x = Random(c.rows * c.in, 1), w = Random(static_cast<size_t>(c.out) * c.in, 2);
  // A wider output stride than out: the tile writes only its own columns.
  const int64_t stride = c.out + 3;
  std::vector<float> got(c.rows * stride, -7.0f);
  const int o_begin = c.out > 2 ? 1 : 0;
  GemmTile(x.data(), c.rows, c.in, w.data(), o_begin, c.out, got.data(), stride);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t o = 0; o < stride; ++o) {
      const float v = got[r * stride + o];
      if (o < o_begin || o >= c.out) {
        EXPECT_EQ(v, -7.0f) << "wrote outside the tile at " << r << "," << o;
        continue;
      }
      const float want = Dot(&x[r * c.in], &w[o * c.in], c.in);
      EXPECT_EQ(std::memcmp(&v, &want, sizeof(float)), 0)
          << "row " << r << " out " << o << ": " << v << " vs Dot " << want;
    }
  }
}

TEST_P(CpuGemmTest, LinearDoesNotDependOnThreads) {
  const GemmCase c = GetParam();
  const auto x = Random(c.rows * c.in, 3), w = Random(static_cast<size_t>(c.out) * c.in, 4);
  std::vector<float> one(c.rows * c.out), three(c.rows * c.out);
  CpuBackend b1(1), b3(3);
  b1.Linear(x.data(), c.rows, c.in, w.data(), c.out, one.data());
  b3.Linear(x.data(), c.rows, c.in, w.data(), c.out, three.data());
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
  EXPECT_EQ(one[0], Dot(x.data(), w.data(), c.in));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuGemmTest,
                         testing::Values(GemmCase{1, 8, 1}, GemmCase{1, 7, 5},
                                         GemmCase{3, 16, 2}, GemmCase{4, 64, 4},
                                         GemmCase{5, 33, 7}, GemmCase{9, 100, 35},
                                         GemmCase{17, 257, 18}, GemmCase{64, 128, 48}));

}  // namespace
}  // namespace spark::engine::backend::cpu
