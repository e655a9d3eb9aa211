// CpuDeepseekOps' RoPE, cache-field writes and compressor pooling against naive references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "tests/engine/backend/deepseek_test_util.h"

namespace spark::engine::backend::cpu {
namespace {

using testing::ExpectClose;
using testing::FakeCache;
using testing::Random;

std::vector<float> Frequencies(int rope_dim) {
  std::vector<float> f;
  for (int i = 0; i < rope_dim / 2; ++i) f.push_back(std::pow(500.0f, -2.0f * i / rope_dim));
  return f;
}

struct RopeCase {
  float scale;
  bool inverse;
};

class CpuDeepseekRopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CpuDeepseekRopeTest, RotatesTheTrailingPairsOnly) {
  CpuBackend backend(3);
  const int tokens = 5, heads = 3, dim = 12, rope_dim = 6;
  const std::vector<float> freq = Frequencies(rope_dim);
  const std::vector<int32_t> positions = {0, 7, 3, 130, 41};
  std::vector<float> x = Random(tokens * heads * dim, 1);
  std::vector<double> want(x.begin(), x.end());
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      testing::RotateRef(&want[(t * heads + h) * dim], dim, freq, GetParam().scale, positions[t],
                         GetParam().inverse);
    }
  }
  backend.deepseek_ops()->Rope(x.data(), positions, heads, dim,
                               {freq.data(), rope_dim, GetParam().scale}, GetParam().inverse);
  ExpectClose(x, want, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(ScalesAndDirections, CpuDeepseekRopeTest,
                         ::testing::Values(RopeCase{1.0f, false}, RopeCase{1.0f, true},
                                           RopeCase{0.7f, false}, RopeCase{0.7f, true}));

TEST(CpuDeepseekOpsTest, InverseRopeUndoesRope) {
  CpuBackend backend(2);
  const std::vector<float> freq = Frequencies(8);
  const std::vector<int32_t> positions = {5, 1000};
  const std::vector<float> x = Random(2 * 2 * 16, 2);
  std::vector<float> y = x;
  const RopeTable table{freq.data(), 8, 1.0f};
  backend.deepseek_ops()->Rope(y.data(), positions, 2, 16, table, false);
  EXPECT_GT(std::fabs(y[15] - x[15]), 1e-3f);
  backend.deepseek_ops()->Rope(y.data(), positions, 2, 16, table, true);
  ExpectClose(y, std::vector<double>(x.begin(), x.end()), 1e-6);
}

TEST(CpuDeepseekOpsTest, WriteFieldTouchesOnlyTheFieldAtEachSlot) {
  CpuBackend backend(1);
  FakeCache cache(10, 9, 3);
  const std::vector<float> before = cache.data;
  const CacheField field = cache.Field(2, 4);
  const std::vector<int64_t> slots = {7, 0, 4};
  const std::vector<float> rows = Random(3 * 4, 4);
  backend.deepseek_ops()->WriteField(rows.data(), slots, field);
  std::vector<float> want = before;
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 4; ++i) want[slots[t] * 9 + 2 + i] = rows[t * 4 + i];
  }
  EXPECT_EQ(cache.data, want);
}

TEST(CpuDeepseekOpsTest, WriteCompressorInputsAddsTheApeOfEachPosition) {
  CpuBackend backend(1);
  const int width = 5, ratio = 4;
  FakeCache cache(12, 2 * width, 5);
  const std::vector<int64_t> slots = {3, 9, 11};
  const std::vector<int32_t> positions = {6, 1, 4};
  const std::vector<float> kv = Random(3 * width, 6), gate = Random(3 * width, 7);
  const std::vector<float> ape = Random(ratio * width, 8);
  CompressorInputs in{kv.data(),
                      gate.data(),
                      ape.data(),
                      width,
                      ratio,
                      cache.Field(0, width),
                      cache.Field(width, width)};
  backend.deepseek_ops()->WriteCompressorInputs(in, positions, slots);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < width; ++i) {
      EXPECT_EQ(cache.At(in.kv_field, slots[t])[i], kv[t * width + i]);
      EXPECT_EQ(cache.At(in.gate_field, slots[t])[i],
                gate[t * width + i] + ape[(positions[t] % ratio) * width + i]);
    }
  }
  // Without a gate (later variants' ratio-1 compressors) only kv is stored.
  const std::vector<float> gate_before(cache.data);
  in.gate = nullptr;
  backend.deepseek_ops()->WriteCompressorInputs(in, positions, slots);
  EXPECT_EQ(cache.data, gate_before);
}

// The reference: per channel a softmax over all `pool` sources with missing ones gated to -inf,
// RMSNorm in double, rotation at the entry's position.
std::vector<double> CompressRef(const FakeCache& cache, const CompressArgs& a,
                                const std::vector<float>& freq, int64_t e) {
  std::vector<double> entry(a.dim);
  for (int ch = 0; ch < a.dim; ++ch) {
    std::vector<double> logits(a.pool), values(a.pool, 0.0);
    for (int i = 0; i < a.pool; ++i) {
      const int64_t slot = a.source_slots[e * a.pool + i];
      const int channel = (a.overlap && i >= a.pool / 2 ? a.dim : 0) + ch;
      logits[i] = slot < 0           ? -INFINITY
                  : a.gate.present() ? double{cache.At(a.gate, slot)[channel]}
                                     : 0.0;
      if (slot >= 0) values[i] = cache.At(a.kv, slot)[channel];
    }
    const std::vector<double> p = testing::SoftmaxRef(logits);
    for (int i = 0; i < a.pool; ++i) entry[ch] += p[i] * values[i];
  }
  if (a.norm != nullptr) {
    double sum = 0;
    for (double v : entry) sum += v * v;
    const double inv = 1.0 / std::sqrt(sum / a.dim + a.eps);
    for (int i = 0; i < a.dim; ++i) entry[i] *= inv * a.norm[i];
  }
  if (a.rope != nullptr) {
    testing::RotateRef(entry.data(), a.dim, freq, a.rope->scale, a.entry_positions[e], false);
  }
  return entry;
}

void ExpectEntries(const FakeCache& cache, const CompressArgs& a, const std::vector<float>& freq) {
  for (size_t e = 0; e < a.entry_slots.size(); ++e) {
    const float* got = cache.At(a.out, a.entry_slots[e]);
    ExpectClose(std::vector<float>(got, got + a.dim), CompressRef(cache, a, freq, e), 1e-5);
  }
}

// CSA-style: 2 x 4 overlapping sources, window 0 missing its first half.
TEST(CpuDeepseekOpsTest, CompressPoolsOverlappingWindowsAndGatesMissingSlots) {
  CpuBackend backend(2);
  const int dim = 6, ratio = 4;
  FakeCache cache(32, 5 * dim, 9);  // kv [2 dim] | gate [2 dim] | entry [dim]
  const std::vector<float> norm = Random(dim, 10), freq = Frequencies(4);
  const RopeTable rope{freq.data(), 4, 1.0f};
  const std::vector<int64_t> sources = {-1, -1, -1, -1, 17, 3,  25, 8,    // window 0
                                        17, 3,  25, 8,  30, 12, 1,  20};  // window 1
  const std::vector<int64_t> entry_slots = {8, 20};
  const std::vector<int32_t> entry_positions = {0, 4};
  const CompressArgs a{.kv = cache.Field(0, 2 * dim),
                       .gate = cache.Field(2 * dim, 2 * dim),
                       .dim = dim,
                       .pool = 2 * ratio,
                       .overlap = true,
                       .source_slots = sources,
                       .entry_slots = entry_slots,
                       .entry_positions = entry_positions,
                       .norm = norm.data(),
                       .eps = 1e-6f,
                       .rope = &rope,
                       .out = cache.Field(4 * dim, dim)};
  backend.deepseek_ops()->Compress(a);
  ExpectEntries(cache, a, freq);
}

// HCA-style: one series, no overlap; and a pool of one without gate, norm or RoPE is a copy.
TEST(CpuDeepseekOpsTest, CompressWithoutOverlapAndWithoutGate) {
  CpuBackend backend(2);
  const int dim = 5;
  FakeCache cache(16, 3 * dim, 11);  // kv | gate | entry
  const std::vector<float> norm = Random(dim, 12), freq = Frequencies(2);
  const RopeTable rope{freq.data(), 2, 0.9f};
  const std::vector<int64_t> sources = {4, 9, 0, 13, 2, 6, 11, 15};
  const std::vector<int64_t> entry_slots = {13, 15};
  const std::vector<int32_t> entry_positions = {0, 4};
  CompressArgs a{.kv = cache.Field(0, dim),
                 .gate = cache.Field(dim, dim),
                 .dim = dim,
                 .pool = 4,
                 .source_slots = sources,
                 .entry_slots = entry_slots,
                 .entry_positions = entry_positions,
                 .norm = norm.data(),
                 .rope = &rope,
                 .out = cache.Field(2 * dim, dim)};
  backend.deepseek_ops()->Compress(a);
  ExpectEntries(cache, a, freq);

  const std::vector<int64_t> one = {7};
  const std::vector<int64_t> at = {3};
  const std::vector<int32_t> pos = {7};
  a = {.kv = cache.Field(0, dim),
       .dim = dim,
       .pool = 1,
       .source_slots = one,
       .entry_slots = at,
       .entry_positions = pos,
       .out = cache.Field(2 * dim, dim)};
  backend.deepseek_ops()->Compress(a);
  for (int i = 0; i < dim; ++i) EXPECT_EQ(cache.At(a.out, 3)[i], cache.At(a.kv, 7)[i]);
}

}  // namespace
}  // namespace spark::engine::backend::cpu
