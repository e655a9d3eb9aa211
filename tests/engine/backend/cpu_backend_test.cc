// The CPU backend's ops against naive single-threaded references written out here.
#include "engine/backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>

#include "engine/core/block_quant.h"
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

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 3, 4, 17, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(CpuBackendTest, WeightBytesArePackedRunsAndRowsAndMustFit) {
  CpuBackend backend(3);
  // A [5, 3] bf16 source; rows 1-2 as one run, then columns 1-2 of every row (stride 3).
  std::vector<uint16_t> src(15);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(100 + i);
  auto dst = backend.AllocateWeights(6 + 10, DType::kBF16);
  ASSERT_TRUE(dst.ok());
  const auto* bytes = reinterpret_cast<const uint8_t*>(src.data());
  ASSERT_TRUE(backend.UploadWeightBytes({bytes + 6, 1, 12, 12}, *dst, 0).ok());
  ASSERT_TRUE(backend.UploadWeightBytes({bytes + 2, 5, 4, 6}, *dst, 12).ok());
  const auto* got = static_cast<const uint16_t*>(dst->raw());
  const std::vector<uint16_t> want = {103, 104, 105, 106, 107, 108, 101, 102,
                                      104, 105, 107, 108, 110, 111, 113, 114};
  EXPECT_EQ(std::vector<uint16_t>(got, got + 16), want);
  EXPECT_EQ(backend.UploadWeightBytes({bytes, 1, 4, 4}, *dst, 30).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.UploadWeightBytes({bytes, 2, 4, 2}, *dst, 0).code(),
            StatusCode::kInvalidArgument);
  // bf16 bytes widened into fp32 weights: the exact values, offsets in fp32 bytes.
  auto wide = backend.AllocateWeights(4, DType::kF32);
  ASSERT_TRUE(wide.ok());
  Backend::WeightBytes columns{bytes + 2, 2, 4, 6};
  columns.widen_bf16 = true;
  ASSERT_TRUE(backend.UploadWeightBytes(columns, *wide, 0).ok());
  const std::vector<float> widened(wide->data(), wide->data() + 4);
  EXPECT_EQ(widened, (std::vector<float>{core::Bf16ToFloat(101), core::Bf16ToFloat(102),
                                         core::Bf16ToFloat(104), core::Bf16ToFloat(105)}));
  EXPECT_EQ(backend.UploadWeightBytes(columns, *wide, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.UploadWeightBytes(columns, *dst, 0).code(), StatusCode::kInvalidArgument)
      << "widening needs an fp32 buffer";
}

TEST(CpuBackendTest, LinearMatchesNaive) {
  CpuBackend backend(3);
  const int rows = 5, in = 37, out = 41;  // not multiples of the tile or vector width
  auto x = Random(rows * in, 1), w = Random(out * in, 2);
  std::vector<float> got(rows * out), want(rows * out);
  backend.Linear(x.data(), rows, in, w.data(), out, got.data());
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double{x[r * in + i]} * w[o * in + i];
      want[r * out + o] = static_cast<float>(s);
    }
  ExpectNear(got, want, 1e-4f);
}

TEST(CpuBackendTest, RmsNormAndSiluMul) {
  CpuBackend backend(2);
  auto x = Random(2 * 8, 3), w = Random(8, 4);
  std::vector<float> got(16);
  backend.RmsNorm(x.data(), w.data(), 2, 8, 1e-6f, got.data());
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 8; ++i) ms += x[r * 8 + i] * x[r * 8 + i] / 8.0;
    for (int i = 0; i < 8; ++i) {
      EXPECT_NEAR(got[r * 8 + i], w[i] * x[r * 8 + i] / std::sqrt(ms + 1e-6), 1e-5);
    }
  }
  const std::vector<float> gate_up = {1.0f, -2.0f, 3.0f, 0.5f};  // one row, inter 2
  std::vector<float> act(2);
  backend.SiluMul(gate_up.data(), 1, 2, act.data());
  EXPECT_NEAR(act[0], 1.0f / (1.0f + std::exp(-1.0f)) * 3.0f, 1e-6);
  EXPECT_NEAR(act[1], -2.0f / (1.0f + std::exp(2.0f)) * 0.5f, 1e-6);
}

TEST(CpuBackendTest, RopeRotatesHalvesByPosition) {
  CpuBackend backend(1);
  const int hd = 4;
  std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4};  // two tokens, one head
  const std::vector<int32_t> pos = {0, 3};
  backend.Rope(x.data(), pos, 1, hd, 10000.0);
  ExpectNear({x[0], x[1], x[2], x[3]}, {1, 2, 3, 4}, 1e-6f);  // position 0: identity
  const double f0 = 3.0, f1 = 3.0 / 100.0;                    // inv_freq = 1, 1/100
  EXPECT_NEAR(x[4], 1 * std::cos(f0) - 3 * std::sin(f0), 1e-5);
  EXPECT_NEAR(x[6], 3 * std::cos(f0) + 1 * std::sin(f0), 1e-5);
  EXPECT_NEAR(x[5], 2 * std::cos(f1) - 4 * std::sin(f1), 1e-5);
  EXPECT_NEAR(x[7], 4 * std::cos(f1) + 2 * std::sin(f1), 1e-5);
}

// fp32 and bf16 caches: the bf16 cache holds the rounded k and v (checked bit for bit), and
// attention over it matches the dense reference on those rounded values.
TEST(CpuBackendTest, PagedAttentionMatchesDenseCausalGqa) {
  CpuBackend backend(4);
  const int heads = 4, kv_heads = 2, hd = 8, bs = 2, len = 7, kvw = kv_heads * hd;
  const auto q = Random(len * heads * hd, 5);
  const std::vector<int32_t> table = {5, 0, 3, 1};  // scrambled blocks
  std::vector<int64_t> slots;
  for (int j = 0; j < len; ++j) slots.push_back(table[j / bs] * bs + j % bs);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto k = Random(len * kvw, 6), v = Random(len * kvw, 7);
    std::vector<float> k_cache(8 * bs * kvw), v_cache(8 * bs * kvw);  // room for either type
    const KvCacheRef cache(k_cache.data(), v_cache.data(), dtype);
    backend.WriteKv(k.data(), v.data(), slots, kvw, cache);
    if (dtype == DType::kBF16) {
      const auto* kb = reinterpret_cast<const uint16_t*>(k_cache.data());
      for (int j = 0; j < len; ++j)
        for (int i = 0; i < kvw; ++i) {
          ASSERT_EQ(kb[slots[j] * kvw + i], core::FloatToBf16(k[j * kvw + i])) << j << "," << i;
        }
      for (float& x : k) x = core::Bf16ToFloat(core::FloatToBf16(x));
      for (float& x : v) x = core::Bf16ToFloat(core::FloatToBf16(x));
    }
    // Sequence: 3 cached tokens, 4 new ones.
    const AttentionSequence seq{0, 4, len, table};
    const AttentionShape shape{heads, kv_heads, hd, bs, 1.0f / std::sqrt(float(hd))};
    std::vector<float> got(4 * heads * hd);
    backend.PagedAttention(&q[3 * heads * hd], std::span(&seq, 1), cache, shape, got.data());
    std::vector<float> want(got.size());
    for (int t = 0; t < 4; ++t)
      for (int h = 0; h < heads; ++h) {
        const int p = 3 + t, g = h / (heads / kv_heads);
        std::vector<double> s(p + 1);
        double mx = -1e30, sum = 0;
        for (int j = 0; j <= p; ++j) {
          s[j] = 0;
          for (int d = 0; d < hd; ++d)
            s[j] += q[(p * heads + h) * hd + d] * k[j * kvw + g * hd + d];
          s[j] *= shape.scale;
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += e = std::exp(e - mx);
        for (int d = 0; d < hd; ++d) {
          double o = 0;
          for (int j = 0; j <= p; ++j) o += s[j] / sum * v[j * kvw + g * hd + d];
          want[(t * heads + h) * hd + d] = static_cast<float>(o);
        }
      }
    ExpectNear(got, want, 1e-5f);
  }
}

TEST(CpuBackendTest, RouteTopKSoftmaxAndNormalise) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  int ids[2];
  float w[2];
  RouteTopK(logits.data(), 4, 2, false, ids, w);
  EXPECT_EQ(ids[0], 1);  // tie with expert 3: lower id first
  EXPECT_EQ(ids[1], 3);
  const double z = 1 + 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / z, 1e-6);
  RouteTopK(logits.data(), 4, 2, true, ids, w);
  EXPECT_NEAR(w[0], 0.5, 1e-6);
  EXPECT_NEAR(w[1], 0.5, 1e-6);
}

TEST(CpuBackendTest, MoeMatchesNaiveAndSkipsRemoteExperts) {
  CpuBackend backend(2);
  const int rows = 3, hidden = 6, inter = 4, experts = 4;
  auto x = Random(rows * hidden, 8), router = Random(rows * experts, 9);
  std::vector<std::vector<float>> gu, dn;
  MoeExperts all{experts, 2, true, inter, 0, {}, {}};
  for (int e = 0; e < experts; ++e) {
    gu.push_back(Random(2 * inter * hidden, 10 + e));
    dn.push_back(Random(hidden * inter, 20 + e));
  }
  for (int e = 0; e < experts; ++e) {
    all.gate_up.push_back(gu[e].data());
    all.down.push_back(dn[e].data());
  }
  std::vector<float> got(rows * hidden), want(rows * hidden, 0.0f);
  backend.Moe(x.data(), rows, hidden, router.data(), all, got.data());
  for (int r = 0; r < rows; ++r) {
    int ids[2];
    float w[2];
    RouteTopK(&router[r * experts], experts, 2, true, ids, w);
    for (int k = 0; k < 2; ++k) {
      std::vector<float> gate_up(2 * inter), act(inter), y(hidden);
      backend.Linear(&x[r * hidden], 1, hidden, gu[ids[k]].data(), 2 * inter, gate_up.data());
      backend.SiluMul(gate_up.data(), 1, inter, act.data());
      backend.Linear(act.data(), 1, inter, dn[ids[k]].data(), hidden, y.data());
      for (int d = 0; d < hidden; ++d) want[r * hidden + d] += w[k] * y[d];
    }
  }
  ExpectNear(got, want, 1e-5f);
  // Expert-parallel halves add up to the whole.
  MoeExperts low{
      experts, 2, true, inter, 0, {gu[0].data(), gu[1].data()}, {dn[0].data(), dn[1].data()}};
  MoeExperts high{
      experts, 2, true, inter, 2, {gu[2].data(), gu[3].data()}, {dn[2].data(), dn[3].data()}};
  std::vector<float> a(rows * hidden), b(rows * hidden);
  backend.Moe(x.data(), rows, hidden, router.data(), low, a.data());
  backend.Moe(x.data(), rows, hidden, router.data(), high, b.data());
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  ExpectNear(a, want, 1e-5f);
}

TEST(CpuBackendTest, VocabParallelEmbeddingZeroesOtherRows) {
  CpuBackend backend(1);
  const std::vector<float> table = {1, 1, 2, 2};  // rows 10 and 11 of the vocabulary
  const std::vector<int32_t> ids = {11, 3, 10};
  std::vector<float> out(6, -1.0f);
  backend.Embedding(table.data(), 10, 2, 2, ids, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 2, 0, 0, 1, 1}));
}

TEST(CpuBackendTest, Bf16WeightsAreRoundedToNearestEvenAndWidenedExactly) {
  CpuBackend backend(2);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1) wins; 1 + 3 * 2^-8 rounds up.
  const std::vector<float> w = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 1e-3f};
  auto b = backend.AllocateWeights(w.size(), DType::kBF16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dtype(), DType::kBF16);
  Buffer moved = std::move(*b);  // the type travels with the memory
  EXPECT_EQ(moved.dtype(), DType::kBF16);
  *b = std::move(moved);
  EXPECT_EQ(b->dtype(), DType::kBF16);
  backend.UploadWeights(w, *b);
  // Linear against identity rows reads the stored values back.
  const std::vector<float> x = {1.0f};
  std::vector<float> out(4);
  backend.Linear(x.data(), 1, 1, b->weight(), 4, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + 4.0f / 256);
  EXPECT_EQ(out[2], -2.5f);
  EXPECT_NEAR(out[3], 1e-3f, 1e-5f);
  EXPECT_NE(out[3], 1e-3f);
}

// bf16 weights (widened tile by tile) give exactly fp32 Linear over the same rounded values.
TEST(CpuBackendTest, Bf16LinearEqualsFp32LinearOnRoundedWeights) {
  CpuBackend backend(3);
  const int rows = 5, in = 70, out = 53;  // several 16-row tiles, a partial last one
  const auto x = Random(rows * in, 90);
  std::vector<float> w = Random(out * in, 91);
  auto b = backend.AllocateWeights(w.size(), DType::kBF16);
  ASSERT_TRUE(b.ok());
  backend.UploadWeights(w, *b);
  for (float& v : w) v = core::Bf16ToFloat(core::FloatToBf16(v));
  std::vector<float> want(rows * out), got(rows * out);
  backend.Linear(x.data(), rows, in, w.data(), out, want.data());
  backend.Linear(x.data(), rows, in, b->weight(), out, got.data());
  EXPECT_EQ(got, want);
}

// A view is a window of its owner's elements, in its type: Linear over views of one stacked
// matrix equals Linear over the separate matrices.
TEST(CpuBackendTest, ViewsOfAStackedMatrixActAsTheParts) {
  CpuBackend backend(1);
  const int in = 8;
  const auto x = Random(2 * in, 92);
  const auto top = Random(3 * in, 93), bottom = Random(5 * in, 94);
  std::vector<float> stacked = top;
  stacked.insert(stacked.end(), bottom.begin(), bottom.end());
  auto all = backend.AllocateWeights(stacked.size(), DType::kBF16);
  auto lower = backend.AllocateWeights(bottom.size(), DType::kBF16);
  ASSERT_TRUE(all.ok() && lower.ok());
  backend.UploadWeights(stacked, *all);
  backend.UploadWeights(bottom, *lower);
  const Buffer view = all->View(3 * in, 5 * in);
  EXPECT_EQ(view.dtype(), DType::kBF16);
  EXPECT_EQ(view.size(), 5u * in);
  EXPECT_EQ(static_cast<const char*>(view.raw()),
            static_cast<const char*>(all->raw()) + 3 * in * 2);
  std::vector<float> want(2 * 5), got(2 * 5);
  backend.Linear(x.data(), 2, in, lower->weight(), 5, want.data());
  backend.Linear(x.data(), 2, in, view.weight(), 5, got.data());
  EXPECT_EQ(got, want);
}

TEST(CpuBackendTest, ArgMaxPairsMergeAcrossVocabularySlices) {
  CpuBackend backend(1);
  // Two rows over a vocabulary of 6 split 3 + 3; row 1 ties across the slices.
  const std::vector<float> left = {0.5f, 2.0f, -1.0f, 4.0f, 0.0f, 1.0f};
  const std::vector<float> right = {1.0f, 3.0f, 2.5f, 4.0f, 4.0f, -9.0f};
  std::vector<float> pairs(8);
  backend.ArgMax(left.data(), 2, 3, 0, pairs.data());
  backend.ArgMax(right.data(), 2, 3, 3, pairs.data() + 4);
  EXPECT_EQ(pairs[0], 2.0f);
  EXPECT_EQ(pairs[1], 1.0f);
  EXPECT_EQ(pairs[7], 3.0f);  // the first of the tied columns, offset by 3
  EXPECT_EQ(*MergeArgMax(pairs, 2, 2), (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(*MergeArgMax(std::span(pairs).first(4), 1, 2), (std::vector<int32_t>{1, 0}));
  // A NaN anywhere in a row shows as the row's value; an empty slice is -inf.
  const std::vector<float> broken = {1.0f, std::nanf(""), 0.5f};
  backend.ArgMax(broken.data(), 1, 3, 0, pairs.data());
  EXPECT_TRUE(std::isnan(pairs[0]));
  // ... and no token is picked from it (nor from +inf), whichever slice holds it.
  pairs[2] = 7.0f;
  pairs[3] = 1.0f;
  auto refused = MergeArgMax(pairs, 2, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("row 0 holds NaN or +inf"), std::string::npos);
  const std::vector<float> inf = {1.0f, 0.0f, std::numeric_limits<float>::infinity(), 5.0f};
  EXPECT_FALSE(MergeArgMax(inf, 2, 1).ok());
  backend.ArgMax(broken.data(), 1, 0, 0, pairs.data());
  EXPECT_EQ(pairs[0], -std::numeric_limits<float>::infinity());
}

TEST(CpuBackendTest, WeightTypeNames) {
  EXPECT_EQ(*ParseDType("bf16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("fp32"), DType::kF32);
  EXPECT_EQ(*ParseDType("fp8"), DType::kFP8);
  EXPECT_EQ(KvDTypeFor(DType::kFP8), DType::kBF16);
  EXPECT_EQ(KvDTypeFor(DType::kF32), DType::kF32);
  auto bad = ParseDType("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp32, bf16 or fp8"), std::string::npos);
}

// fp8 weights (quantised per 128 x 128 block on upload, widened tile by tile) give exactly fp32
// Linear over the dequantised values; partial blocks at both ends.
TEST(CpuBackendTest, Fp8LinearEqualsFp32LinearOnDequantisedWeights) {
  CpuBackend backend(3);
  const int rows = 3, in = 200, out = 150;
  const auto x = Random(rows * in, 95);
  std::vector<float> w = Random(out * in, 96);
  auto b = backend.AllocateMatrix(out, in, DType::kFP8);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->dtype(), DType::kFP8);
  EXPECT_EQ(b->size(), size_t{out} * in);
  backend.UploadMatrix(w, in, *b);
  const core::Fp8Blocks q = core::QuantizeFp8Blocks(w, out, in, kFp8Block);
  auto deq = core::DequantFp8Blocks(q.values, out, in, q.scales, {kFp8Block, kFp8Block}, "w");
  ASSERT_TRUE(deq.ok());
  std::vector<float> want(rows * out), got(rows * out), exact(rows * out);
  backend.Linear(x.data(), rows, in, deq->data(), out, want.data());
  backend.Linear(x.data(), rows, in, b->weight(), out, got.data());
  EXPECT_EQ(got, want);
  backend.Linear(x.data(), rows, in, w.data(), out, exact.data());
  EXPECT_NE(got, exact);  // the quantisation is real
  // Plain buffers of fp8 do not exist (the scales need a shape).
  EXPECT_FALSE(backend.AllocateWeights(16, DType::kFP8).ok());
}

}  // namespace
}  // namespace spark::engine::backend::cpu
