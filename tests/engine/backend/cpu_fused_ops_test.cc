// The fused ops' defaults on the CPU backend, against the plain ops they stand for: each must
// give the same bits (the models' fused and op-by-op paths are compared bit for bit on top).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/backend/cpu/cpu_backend.h"
#include "comm/local_communicator.h"
#include "engine/core/dtype.h"

namespace spark::engine::backend::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CpuFusedOpsTest, SplitColumnsCutsRowsInOrder) {
  CpuBackend b(1);
  const int rows = 3, widths[] = {2, 5, 1};
  std::vector<float> src(rows * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  std::vector<float> a(rows * 2, -1), m(rows * 5, -1), z(rows * 1, -1);
  const ColumnSlice parts[] = {{a.data(), widths[0]}, {m.data(), widths[1]}, {z.data(), widths[2]}};
  b.SplitColumns(src.data(), rows, parts);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(a[r * 2 + 1], src[r * 8 + 1]);
    EXPECT_EQ(m[r * 5 + 4], src[r * 8 + 6]);
    EXPECT_EQ(z[r], src[r * 8 + 7]);
  }
}

TEST(CpuFusedOpsTest, LinearAddRmsNormEqualsLinearAddThenRmsNorm) {
  CpuBackend b(2);
  const int rows = 4, in = 24, out = 16;
  const auto x = Random(rows * in, 1), w = Random(out * in, 2), norm = Random(out, 3);
  auto h1 = Random(rows * out, 4), h2 = h1;
  std::vector<float> scratch(rows * out), n1(rows * out), n2(rows * out);
  b.LinearAdd(x.data(), rows, in, w.data(), out, scratch.data(), h1.data());
  b.RmsNorm(h1.data(), norm.data(), rows, out, 1e-6f, n1.data());
  b.LinearAddRmsNorm(x.data(), rows, in, w.data(), out, scratch.data(), h2.data(), norm.data(),
                     1e-6f, n2.data());
  EXPECT_EQ(h2, h1);
  EXPECT_EQ(n2, n1);
}

TEST(CpuFusedOpsTest, AllReduceAddRmsNormSumsTheRanksFirst) {
  const int rows = 2, dim = 8, world = 2;
  const auto norm = Random(dim, 5), h0 = Random(rows * dim, 6);
  std::vector<std::vector<float>> deltas = {Random(rows * dim, 7), Random(rows * dim, 8)};
  // What every rank must end with: h + (delta0 + delta1), normed.
  CpuBackend ref(1);
  std::vector<float> sum(rows * dim), want_h = h0, want(rows * dim);
  for (int i = 0; i < rows * dim; ++i) sum[i] = deltas[0][i] + deltas[1][i];
  ref.AddRmsNorm(want_h.data(), sum.data(), norm.data(), rows, dim, 1e-6f, want.data());
  auto group = comm::CreateLocalGroup(world);
  std::vector<std::vector<float>> hs(world, h0), outs(world, std::vector<float>(rows * dim));
  std::vector<std::thread> threads;
  std::vector<Status> status(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      CpuBackend b(1);
      status[r] = b.AllReduceAddRmsNorm(group[r].get(), hs[r].data(), deltas[r].data(),
                                        norm.data(), rows, dim, 1e-6f, outs[r].data());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r].message();
    EXPECT_EQ(hs[r], want_h) << "rank " << r;
    EXPECT_EQ(outs[r], want) << "rank " << r;
  }
  // One rank: no communicator, a plain AddRmsNorm.
  CpuBackend b(1);
  auto h = h0, delta = deltas[0];
  std::vector<float> out(rows * dim), h_ref = h0, out_ref(rows * dim);
  ASSERT_TRUE(b.AllReduceAddRmsNorm(nullptr, h.data(), delta.data(), norm.data(), rows, dim, 1e-6f,
                                    out.data())
                  .ok());
  b.AddRmsNorm(h_ref.data(), deltas[0].data(), norm.data(), rows, dim, 1e-6f, out_ref.data());
  EXPECT_EQ(out, out_ref);
}

TEST(CpuFusedOpsTest, StackedQkvEqualsSeparateOutputs) {
  CpuBackend b(2);
  const int tokens = 3, heads = 2, kv_heads = 1, hd = 8, total = (heads + 2 * kv_heads) * hd;
  const auto qkv = Random(tokens * total, 9), qn = Random(hd, 10), kn = Random(hd, 11);
  const std::vector<int32_t> pos = {0, 5, 9};
  const std::vector<int64_t> slots = {2, 0, 1};
  auto run = [&](bool stacked, std::vector<float>* kc, std::vector<float>* vc) {
    std::vector<float> q(tokens * heads * hd), k(tokens * kv_heads * hd), v(k.size());
    if (!stacked) {
      const ColumnSlice parts[] = {{q.data(), heads * hd}, {k.data(), hd}, {v.data(), hd}};
      b.SplitColumns(qkv.data(), tokens, parts);
    }
    b.QkNormRopeWriteKv({.q = q.data(),
                         .k = k.data(),
                         .v = v.data(),
                         .qkv = stacked ? qkv.data() : nullptr,
                         .qkv_stride = stacked ? total : 0,
                         .heads = heads,
                         .kv_heads = kv_heads,
                         .head_dim = hd,
                         .q_norm = qn.data(),
                         .k_norm = kn.data(),
                         .eps = 1e-6f,
                         .theta = 1e4,
                         .cache = {kc->data(), vc->data(), DType::kF32}},
                        pos, slots);
    return q;
  };
  std::vector<float> kc1(3 * hd), vc1(3 * hd), kc2(3 * hd), vc2(3 * hd);
  EXPECT_EQ(run(true, &kc1, &vc1), run(false, &kc2, &vc2));
  EXPECT_EQ(kc1, kc2);
  EXPECT_EQ(vc1, vc2);
}

TEST(CpuFusedOpsTest, OutputsWriteTheirBf16CopyWhenAsked) {
  CpuBackend b(1);
  const auto x = Random(16, 12), w = Random(8, 13);
  std::vector<float> out(16);
  std::vector<uint16_t> copy(16, 0xFFFF);
  b.RmsNorm(x.data(), w.data(), 2, 8, 1e-6f, {out.data(), copy.data()});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(copy[i], core::FloatToBf16(out[i])) << i;
}

}  // namespace
}  // namespace spark::engine::backend::cpu
