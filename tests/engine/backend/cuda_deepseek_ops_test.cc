// CudaDeepseekOps against CpuDeepseekOps (the fp32 reference) on random inputs: RoPE, cache
// fields, the compressors, mHC, the fake quantisers and Engram's gate, each on small shapes that
// reach the edge cases (unaligned rows, missing sources, -inf gates, inverse RoPE, pre-only mHC,
// rows the quantisation block does not divide) and at DeepSeek-V4.1-Flash's sizes (hidden 5120,
// 64 heads x 512 with 64 rope dims, indexer 32 x 128, hc_mult 4). Values within 1e-5 of the
// reference's largest magnitude unless noted; copies and quantisation bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "tests/engine/backend/cuda_deepseek_test_util.h"

namespace spark::engine::backend::cuda {
namespace {

using testing::CudaDeepseekTest;
using testing::ExpectNear;
using testing::ExpectSameBits;
using testing::Random;
using testing::Twin;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Frequencies(int rope_dim, float theta) {
  std::vector<float> f;
  for (int i = 0; i < rope_dim / 2; ++i) f.push_back(std::pow(theta, -2.0f * i / rope_dim));
  return f;
}

std::vector<int32_t> Positions(size_t n, int max, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (int32_t& v : p) v = static_cast<int32_t>(rng() % max);
  return p;
}

// n distinct slots below `limit`, shuffled.
std::vector<int64_t> Slots(size_t n, int64_t limit, uint32_t seed) {
  std::vector<int64_t> all(limit);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(n);
  return all;
}

struct RopeCase {
  const char* name;
  int tokens, heads, dim, rope_dim;
  float scale;
  bool inverse;
  int max_position;
};

class CudaDeepseekRopeTest : public CudaDeepseekTest,
                             public ::testing::WithParamInterface<RopeCase> {};

TEST_P(CudaDeepseekRopeTest, MatchesCpu) {
  const RopeCase& c = GetParam();
  Twin x = Both(Random(size_t{1} * c.tokens * c.heads * c.dim, 1));
  Twin freq = Both(Frequencies(c.rope_dim, 10000.0f));
  const std::vector<int32_t> positions = Positions(c.tokens, c.max_position, 2);
  cpu_ops().Rope(x.h(), positions, c.heads, c.dim, {freq.h(), c.rope_dim, c.scale}, c.inverse);
  gpu_ops().Rope(x.d(), positions, c.heads, c.dim, {freq.d(), c.rope_dim, c.scale}, c.inverse);
  ExpectNear(Get(x), x.host, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaDeepseekRopeTest,
    ::testing::Values(RopeCase{"Small", 5, 3, 12, 6, 1.0f, false, 200},
                      RopeCase{"SmallInverseScaled", 5, 3, 12, 6, 0.7f, true, 200},
                      RopeCase{"OddNopeWidth", 4, 2, 13, 6, 1.0f, false, 5000},
                      RopeCase{"WholeVector", 3, 1, 8, 8, 1.2f, true, 100},
                      RopeCase{"FlashQueries", 32, 64, 512, 64, 1.0f, false, 1 << 20},
                      RopeCase{"FlashOutputInverse", 32, 64, 512, 64, 1.3f, true, 1 << 20},
                      RopeCase{"FlashIndexerPrefill", 2048, 32, 128, 64, 1.3f, false, 65536}),
    [](const auto& info) { return info.param.name; });

struct FieldCase {
  const char* name;
  int tokens, slots, stride, offset, width;
};

class CudaDeepseekFieldTest : public CudaDeepseekTest,
                              public ::testing::WithParamInterface<FieldCase> {};

TEST_P(CudaDeepseekFieldTest, WriteFieldTouchesOnlyTheField) {
  const FieldCase& c = GetParam();
  Twin cache = Both(Random(size_t{1} * c.slots * c.stride, 3));
  const Twin rows = Both(Random(size_t{1} * c.tokens * c.width, 4));
  const std::vector<int64_t> slots = Slots(c.tokens, c.slots, 5);
  cpu_ops().WriteField(rows.host.data(), slots, {cache.h(), c.stride, c.offset, c.width});
  gpu_ops().WriteField(rows.dev.data(), slots, {cache.d(), c.stride, c.offset, c.width});
  ExpectSameBits(Get(cache), cache.host);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeepseekFieldTest,
                         ::testing::Values(FieldCase{"Unaligned", 3, 10, 9, 2, 5},
                                           FieldCase{"AlignedSmall", 4, 12, 16, 4, 8},
                                           FieldCase{"FlashWindowKv", 1024, 4096, 1152, 0, 512},
                                           FieldCase{"FlashIndexKey", 1024, 4096, 1152, 1024, 128}),
                         [](const auto& info) { return info.param.name; });

struct CompressorCase {
  const char* name;
  int tokens, width, ratio;
  bool gate, ape;
  int offset;  // of the kv field; the gate field follows it
};

class CudaDeepseekCompressorInputsTest : public CudaDeepseekTest,
                                         public ::testing::WithParamInterface<CompressorCase> {};

TEST_P(CudaDeepseekCompressorInputsTest, StoresKvAndGatePlusApe) {
  const CompressorCase& c = GetParam();
  const int slots = 2 * c.tokens + 3, stride = c.offset + 2 * c.width + 1;
  Twin cache = Both(Random(size_t{1} * slots * stride, 6));
  const Twin kv = Both(Random(size_t{1} * c.tokens * c.width, 7));
  const Twin gate = Both(Random(size_t{1} * c.tokens * c.width, 8));
  const Twin ape = Both(Random(size_t{1} * c.ratio * c.width, 9));
  const std::vector<int64_t> at = Slots(c.tokens, slots, 10);
  const std::vector<int32_t> positions = Positions(c.tokens, 100000, 11);
  auto inputs = [&](const Twin& k, const Twin& g, const Twin& a, float* base, bool device) {
    auto p = [&](const Twin& t) { return t.on(device); };
    return CompressorInputs{p(k),
                            c.gate ? p(g) : nullptr,
                            c.ape ? p(a) : nullptr,
                            c.width,
                            c.ratio,
                            {base, stride, c.offset, c.width},
                            {base, stride, c.offset + c.width, c.width}};
  };
  cpu_ops().WriteCompressorInputs(inputs(kv, gate, ape, cache.h(), false), positions, at);
  gpu_ops().WriteCompressorInputs(inputs(kv, gate, ape, cache.d(), true), positions, at);
  ExpectSameBits(Get(cache), cache.host);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaDeepseekCompressorInputsTest,
    ::testing::Values(CompressorCase{"UnalignedWithApe", 5, 5, 4, true, true, 1},
                      CompressorCase{"NoApe", 5, 8, 4, true, false, 0},
                      CompressorCase{"NoGate", 5, 8, 4, false, false, 0},
                      CompressorCase{"FlashRatio4", 512, 512, 4, true, true, 0},
                      CompressorCase{"FlashRatio2Prefill", 4096, 512, 2, true, true, 512}),
    [](const auto& info) { return info.param.name; });

struct CompressCase {
  const char* name;
  int dim, pool, entries;
  bool overlap, gate, norm, rope, out_rows;
  double missing;  // fraction of sources missing (-1)
  bool minus_inf_gates;
};

class CudaDeepseekCompressTest : public CudaDeepseekTest,
                                 public ::testing::WithParamInterface<CompressCase> {};

// Cache rows: kv [w] | gate [w] | entry [dim], w = dim (2 dim with overlap). Entry 0 misses
// every source; with overlap the first half of entry 1's sources is missing (window 0).
TEST_P(CudaDeepseekCompressTest, PoolsLikeTheReference) {
  const CompressCase& c = GetParam();
  const int w = c.overlap ? 2 * c.dim : c.dim, stride = 2 * w + c.dim;
  const int slots = std::max(c.entries * c.pool, 16) + c.entries;
  std::vector<float> values = Random(size_t{1} * slots * stride, 12);
  std::mt19937 rng(13);
  if (c.minus_inf_gates) {
    for (int s = 0; s < slots; ++s) {
      for (int i = 0; i < w; ++i) {
        if (rng() % 4 == 0) values[size_t{1} * s * stride + w + i] = -kInf;
      }
    }
  }
  Twin cache = Both(values);
  std::vector<int64_t> sources(size_t{1} * c.entries * c.pool);
  for (int64_t& s : sources) {
    const bool missing = std::uniform_real_distribution<double>(0, 1)(rng) < c.missing;
    s = missing ? -1 : static_cast<int64_t>(rng() % slots);
  }
  if (c.entries > 1) std::fill_n(sources.begin(), c.pool, -1);
  if (c.entries > 2 && c.overlap) std::fill_n(sources.begin() + c.pool, c.pool / 2, -1);
  const std::vector<int64_t> entry_slots = Slots(c.entries, slots, 14);
  const std::vector<int32_t> positions = Positions(c.entries, 1 << 20, 15);
  const Twin norm = Both(Random(c.dim, 16));
  const Twin freq = Both(Frequencies(64, 10000.0f));
  Twin out = Both(std::vector<float>(size_t{1} * c.entries * c.dim, 7.0f));
  auto args = [&](bool device, RopeTable* rope) {
    float* base = cache.on(device);
    // RopeTable's contract: an even rope_dim (dim 5 rotates 4 channels after one nope channel).
    *rope = {freq.on(device), std::min(64, c.dim) / 2 * 2, 0.9f};
    CompressArgs a;
    a.kv = {base, stride, 0, w};
    if (c.gate) a.gate = {base, stride, w, w};
    a.dim = c.dim;
    a.pool = c.pool;
    a.overlap = c.overlap;
    a.source_slots = sources;
    a.entry_slots = entry_slots;
    a.entry_positions = positions;
    a.norm = c.norm ? norm.on(device) : nullptr;
    a.eps = 1e-6f;
    a.rope = c.rope ? rope : nullptr;
    a.out = {base, stride, 2 * w, c.dim};
    if (c.out_rows) a.out_rows = out.on(device);
    return a;
  };
  RopeTable cpu_rope, gpu_rope;
  cpu_ops().Compress(args(false, &cpu_rope));
  gpu_ops().Compress(args(true, &gpu_rope));
  ExpectNear(Get(cache), cache.host, 1e-5);
  ExpectNear(Get(out), out.host, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaDeepseekCompressTest,
    ::testing::Values(
        // name, dim, pool, entries, overlap, gate, norm, rope, out_rows, missing, -inf gates
        CompressCase{"CsaOverlap", 6, 8, 4, true, true, true, true, false, 0.1, false},
        CompressCase{"HcaNoOverlap", 5, 4, 3, false, true, true, true, false, 0.0, false},
        CompressCase{"CopyWithoutGate", 5, 1, 3, false, false, false, false, false, 0.0, false},
        CompressCase{"EqualWeightsWithoutGate", 8, 4, 4, false, false, true, false, true, 0.2,
                     false},
        CompressCase{"MinusInfGates", 8, 4, 6, true, true, false, true, true, 0.0, true},
        CompressCase{"FlashHcaDecode", 512, 128, 4, false, true, true, true, false, 0.0, false},
        CompressCase{"FlashCsaPrefill", 512, 8, 2048, true, true, true, true, true, 0.0, false},
        CompressCase{"FlashRatio2Prefill", 512, 2, 4096, false, true, true, false, true, 0.0,
                     false}),
    [](const auto& info) { return info.param.name; });

struct HcCase {
  const char* name;
  int tokens, n, hidden;
};

class CudaDeepseekHcTest : public CudaDeepseekTest, public ::testing::WithParamInterface<HcCase> {};

TEST_P(CudaDeepseekHcTest, ExpandCollapseAndPostMatchCpu) {
  const HcCase& c = GetParam();
  const size_t width = size_t{1} * c.n * c.hidden;
  const Twin x = Both(Random(size_t{1} * c.tokens * c.hidden, 20));
  Twin streams = Both(std::vector<float>(c.tokens * width, 3.0f));
  cpu_ops().HcExpand(x.host.data(), c.tokens, c.n, c.hidden, streams.h());
  gpu_ops().HcExpand(x.dev.data(), c.tokens, c.n, c.hidden, streams.d());
  ExpectSameBits(Get(streams), streams.host);

  streams = Both(Random(c.tokens * width, 21));
  const Twin pre = Both(Random(size_t{1} * c.tokens * c.n, 22));
  const Twin post = Both(Random(size_t{1} * c.tokens * c.n, 23));
  const Twin comb = Both(Random(size_t{1} * c.tokens * c.n * c.n, 24));
  const Twin y = Both(Random(size_t{1} * c.tokens * c.hidden, 25));
  Twin collapsed = Both(std::vector<float>(size_t{1} * c.tokens * c.hidden));
  cpu_ops().HcCollapse(streams.h(), pre.host.data(), c.tokens, c.n, c.hidden, collapsed.h());
  gpu_ops().HcCollapse(streams.d(), pre.dev.data(), c.tokens, c.n, c.hidden, collapsed.d());
  ExpectNear(Get(collapsed), collapsed.host, 1e-6);
  cpu_ops().HcPost(streams.h(), y.host.data(), post.host.data(), comb.host.data(), c.tokens, c.n,
                   c.hidden);
  gpu_ops().HcPost(streams.d(), y.dev.data(), post.dev.data(), comb.dev.data(), c.tokens, c.n,
                   c.hidden);
  ExpectNear(Get(streams), streams.host, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeepseekHcTest,
                         ::testing::Values(HcCase{"Small", 3, 4, 8}, HcCase{"Unaligned", 3, 4, 7},
                                           HcCase{"ThreeStreams", 2, 3, 12},
                                           HcCase{"FlashDecode", 32, 4, 5120},
                                           HcCase{"FlashPrefill", 1024, 4, 5120}),
                         [](const auto& info) { return info.param.name; });

struct MixCase {
  const char* name;
  int tokens, hidden, iters;
  bool pre_only;
};

class CudaDeepseekHcMixTest : public CudaDeepseekTest,
                              public ::testing::WithParamInterface<MixCase> {};

TEST_P(CudaDeepseekHcMixTest, MatchesCpu) {
  const MixCase& c = GetParam();
  const int n = 4, outputs = c.pre_only ? n : n * (n + 2);
  const int64_t width = int64_t{n} * c.hidden;
  const Twin streams = Both(Random(c.tokens * width, 30));
  const Twin fn = Both(Random(outputs * width, 31, 1.0f / std::sqrt(static_cast<float>(width))));
  const Twin base = Both(Random(outputs, 32));
  const Twin scale =
      Both(c.pre_only ? std::vector<float>{1.1f} : std::vector<float>{0.8f, 1.3f, 0.6f});
  Twin pre = Both(std::vector<float>(size_t{1} * c.tokens * n));
  Twin post = Both(std::vector<float>(size_t{1} * c.tokens * n));
  Twin comb = Both(std::vector<float>(size_t{1} * c.tokens * n * n));
  auto args = [&](bool device) {
    auto p = [&](const Twin& t) { return t.on(device); };
    HcMixArgs a;
    a.streams = p(streams);
    a.tokens = c.tokens;
    a.n = n;
    a.hidden = c.hidden;
    a.fn = p(fn);
    a.base = p(base);
    a.scale = p(scale);
    a.sinkhorn_iters = c.iters;
    a.pre = p(pre);
    if (!c.pre_only) {
      a.post = p(post);
      a.comb = p(comb);
    }
    return a;
  };
  cpu_ops().HcMix(args(false));
  gpu_ops().HcMix(args(true));
  ExpectNear(Get(pre), pre.host, 1e-5);
  if (c.pre_only) return;
  ExpectNear(Get(post), post.host, 1e-5);
  ExpectNear(Get(comb), comb.host, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeepseekHcMixTest,
                         ::testing::Values(MixCase{"OneIteration", 3, 8, 1, false},
                                           MixCase{"TwoIterations", 3, 8, 2, false},
                                           MixCase{"TwentyIterations", 5, 8, 20, false},
                                           MixCase{"PreOnly", 5, 8, 1, true},
                                           MixCase{"OddTokenCount", 17, 12, 3, false},
                                           MixCase{"FlashDecode", 1, 5120, 20, false},
                                           MixCase{"FlashDecodeBatch", 32, 5120, 20, false},
                                           MixCase{"FlashHeadPrefill", 37, 5120, 1, true},
                                           MixCase{"FlashPrefill", 2048, 5120, 20, false}),
                         [](const auto& info) { return info.param.name; });

struct QuantCase {
  const char* name;
  FakeQuantFormat format;
  int64_t rows;
  int width, block;
  float sigma;
};

class CudaDeepseekFakeQuantTest : public CudaDeepseekTest,
                                  public ::testing::WithParamInterface<QuantCase> {};

// Random rows plus values that land on the grids' ties, zeros of both signs, a saturating and
// a vanishing block: bit-for-bit the reference's rounding.
TEST_P(CudaDeepseekFakeQuantTest, MatchesCpuBitForBit) {
  const QuantCase& c = GetParam();
  std::vector<float> x = Random(c.rows * c.width, 40, c.sigma);
  const std::vector<float> special = {
      6.0f,   2.5f,   0.75f,  0.25f,   5.0f,  3.5f,   -1.25f, -1.75f, 0.3f, -0.0f, 0.0f,  1.0f,
      448.0f, 432.0f, 440.0f, -0.001f, 1e30f, -1e30f, 1e-30f, 3e-39f, 1.5f, 4.0f,  -6.0f, 0.5f};
  for (size_t i = 0; i < special.size() && i < x.size(); ++i) x[i] = special[i];
  if (x.size() >= 3 * static_cast<size_t>(c.block)) {  // an all-tiny block and a zero block
    for (int i = 0; i < c.block; ++i) x[c.block + i] = 1e-38f * (i % 3);
    for (int i = 0; i < c.block; ++i) x[2 * c.block + i] = 0.0f;
  }
  Twin t = Both(x);
  cpu_ops().FakeQuant({t.h(), c.rows, c.width, c.block, c.format});
  gpu_ops().FakeQuant({t.d(), c.rows, c.width, c.block, c.format});
  const std::vector<float> got = Get(t);
  ExpectSameBits(got, t.host);
  if (c.width % c.block != 0) {
    EXPECT_EQ(got, x);  // left as it was
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaDeepseekFakeQuantTest,
    ::testing::Values(QuantCase{"Fp8Block32", FakeQuantFormat::kFp8Ue8m0, 5, 64, 32, 1.0f},
                      QuantCase{"Fp4Ue8m0Block32", FakeQuantFormat::kFp4Ue8m0, 5, 64, 32, 1.0f},
                      QuantCase{"Fp4E4m3Block16", FakeQuantFormat::kFp4E4m3, 5, 64, 16, 1.0f},
                      QuantCase{"Fp8Block16Large", FakeQuantFormat::kFp8Ue8m0, 3, 48, 16, 300.0f},
                      QuantCase{"Fp4TinyValues", FakeQuantFormat::kFp4Ue8m0, 3, 64, 32, 1e-6f},
                      QuantCase{"Block8", FakeQuantFormat::kFp4E4m3, 4, 24, 8, 1.0f},
                      QuantCase{"Block64ByThreads", FakeQuantFormat::kFp8Ue8m0, 3, 128, 64, 1.0f},
                      QuantCase{"Block24ByThreads", FakeQuantFormat::kFp4E4m3, 3, 72, 24, 2.0f},
                      QuantCase{"WidthNotDivided", FakeQuantFormat::kFp8Ue8m0, 3, 20, 32, 1.0f},
                      QuantCase{"OddElementCount", FakeQuantFormat::kFp4Ue8m0, 7, 16, 16, 1.0f},
                      QuantCase{"FlashWindowKv", FakeQuantFormat::kFp8Ue8m0, 8192, 512, 32, 1.0f},
                      QuantCase{"FlashIndexerQueries", FakeQuantFormat::kFp4Ue8m0, 64 * 32, 128, 32,
                                1.0f},
                      QuantCase{"FlashEntries", FakeQuantFormat::kFp4E4m3, 4096, 512, 16, 1.0f}),
    [](const auto& info) { return info.param.name; });

struct EngramCase {
  const char* name;
  int tokens, n, hidden;
  float eps;
};

class CudaDeepseekEngramTest : public CudaDeepseekTest,
                               public ::testing::WithParamInterface<EngramCase> {};

TEST_P(CudaDeepseekEngramTest, GatedWriteMatchesCpu) {
  const EngramCase& c = GetParam();
  Twin streams = Both(Random(size_t{1} * c.tokens * c.n * c.hidden, 50));
  const Twin kv = Both(Random(size_t{1} * c.tokens * (c.n + 1) * c.hidden, 51));
  const Twin weight = Both(Random(size_t{1} * c.n * c.hidden, 52));
  cpu_ops().EngramGate(
      {streams.h(), kv.host.data(), weight.host.data(), c.tokens, c.n, c.hidden, c.eps});
  gpu_ops().EngramGate(
      {streams.d(), kv.dev.data(), weight.dev.data(), c.tokens, c.n, c.hidden, c.eps});
  ExpectNear(Get(streams), streams.host, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeepseekEngramTest,
                         ::testing::Values(EngramCase{"Small", 2, 2, 2, 0.0f},
                                           EngramCase{"Unaligned", 3, 4, 7, 1e-20f},
                                           EngramCase{"FlashDecode", 32, 4, 5120, 1e-20f},
                                           EngramCase{"FlashPrefill", 512, 4, 5120, 1e-20f}),
                         [](const auto& info) { return info.param.name; });

// The ops whose launches follow the step's candidate lists refuse a graph step by name instead
// of capturing shapes a replay could not change.
TEST_F(CudaDeepseekTest, CandidateOpsRefuseGraphSteps) {
  auto b = CudaBackend::Create({});
  ASSERT_TRUE(b.ok());
  CudaBackend& g = **b;
  Twin cache = Both(Random(64, 60));
  ASSERT_TRUE(g.BeginGraph("refuse", 4).ok());
  const std::vector<int64_t> sources = {1, 2}, entry = {3};
  CompressArgs a;
  a.kv = {cache.d(), 4, 0, 4};
  a.dim = 4;
  a.pool = 2;
  a.source_slots = sources;
  a.entry_slots = entry;
  a.out = {cache.d(), 4, 0, 4};
  g.deepseek_ops()->Compress(a);
  EXPECT_EQ(g.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("Compress"), std::string::npos) << g.status().message();
  g.CancelDecodeGraph();
}

}  // namespace
}  // namespace spark::engine::backend::cuda
