// CudaDeepseekOps' lightning indexer, candidate blocks and sparse attention against
// CpuDeepseekOps on random inputs: small shapes for the edge cases (fewer candidates than
// top_k, -inf masks, masked rows that score only their unmasked candidates, exact ties, rows
// without candidates, -1 selections, unaligned fields, split key lists, head counts that fill
// no warp evenly) and DeepSeek-V4.1-Flash's sizes (indexer 32 x
// 128 with top 512 over 64K-256K candidates, blocks of 8 with top 2048, 64 or 16 heads x 512
// with a window of 128). Selections equal the reference's except at near ties (reference scores
// within 1e-5 of the row's largest), and never at ties that are exact by construction (equal
// keys, all-zero scores); attention within 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/deepseek_attention.h"
#include "tests/engine/backend/cuda_deepseek_test_util.h"

namespace spark::engine::backend::cuda {
namespace {

using testing::CudaDeepseekTest;
using testing::ExpectNear;
using testing::ExpectSameSelection;
using testing::Random;
using testing::Twin;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Scores equal where -inf, within tol of the row's largest finite magnitude elsewhere.
void ExpectScores(const std::vector<float>& got, const std::vector<float>& want, int64_t stride,
                  double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r * stride < want.size(); ++r) {
    double scale = 0;
    for (int64_t c = 0; c < stride; ++c) {
      const float w = want[r * stride + c];
      if (std::isfinite(w)) scale = std::max<double>(scale, std::fabs(w));
    }
    for (int64_t c = 0; c < stride; ++c) {
      const float g = got[r * stride + c], w = want[r * stride + c];
      if (!std::isfinite(w)) {
        ASSERT_EQ(g, w) << "row " << r << " candidate " << c;
        continue;
      }
      ASSERT_LE(std::fabs(double{g} - w), tol * std::max(scale, 1e-30))
          << "row " << r << " candidate " << c << ": got " << g << ", want " << w;
    }
  }
}

struct IndexerCase {
  const char* name;
  int heads, dim, top_k;
  std::vector<std::vector<int32_t>> counts;  // per sequence, its queries' counts
  bool mask = false, scores = false;
  bool aligned = true;      // key field rows 16-byte aligned
  int duplicate_run = 1;    // consecutive candidates sharing one key (exact ties)
  bool all_zero = false;    // every score exactly 0 (ReLU of negative dots)
  double mask_keep = 0.67;  // with a mask: the share of mask blocks kept (finite), the rest -inf
  int mask_block = 1;       // candidates a mask block spans (8: CandidateBlocks' pattern)
};

class CudaDeepseekIndexerTest : public CudaDeepseekTest,
                                public ::testing::WithParamInterface<IndexerCase> {};

TEST_P(CudaDeepseekIndexerTest, SelectsLikeTheReference) {
  const IndexerCase& c = GetParam();
  std::vector<int64_t> slots, first;
  std::vector<int32_t> count;
  int64_t keys = 0;
  for (const std::vector<int32_t>& seq : c.counts) {
    const int32_t length = *std::max_element(seq.begin(), seq.end());
    for (int32_t n : seq) {
      first.push_back(static_cast<int64_t>(slots.size()));
      count.push_back(n);
    }
    for (int32_t i = 0; i < length; ++i) slots.push_back(keys + i / c.duplicate_run);
    keys += (length + c.duplicate_run - 1) / c.duplicate_run;
  }
  std::shuffle(slots.begin(), slots.end(), std::mt19937(1));       // same keys, scattered slots
  if (c.duplicate_run > 1) std::sort(slots.begin(), slots.end());  // runs stay together
  const int64_t tokens = static_cast<int64_t>(count.size());
  const int offset = c.aligned ? 4 : 1, stride = c.dim + (c.aligned ? 8 : 3);
  std::vector<float> cache = Random((keys + 3) * stride, 2);
  std::vector<float> q = Random(tokens * c.heads * c.dim, 3);
  if (c.all_zero) {
    std::fill(q.begin(), q.end(), 1.0f);
    for (float& v : cache) v = -std::fabs(v) - 0.01f;
  }
  const Twin keys_twin = Both(cache), q_twin = Both(q);
  const Twin weights = Both(Random(tokens * c.heads, 4));
  const int stride_s = std::max(1, *std::max_element(count.begin(), count.end()));
  std::vector<float> mask_values = Random(tokens * stride_s, 5, 0.3f);
  std::mt19937 rng(6);
  for (size_t b = 0; b < mask_values.size(); b += c.mask_block) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < c.mask_keep) continue;
    std::fill_n(mask_values.begin() + b, std::min<size_t>(c.mask_block, mask_values.size() - b),
                -kInf);
  }
  const Twin mask = Both(mask_values);
  Twin selected = Both(std::vector<float>(tokens * c.top_k, 99.0f));
  Twin scores = Both(std::vector<float>(tokens * stride_s, 99.0f));
  auto args = [&](bool device, bool with_scores) {
    auto p = [&](const Twin& t) { return t.on(device); };
    IndexerArgs a;
    a.q = p(q_twin);
    a.weights = p(weights);
    a.weight_scale = 0.7f;
    a.heads = c.heads;
    a.dim = c.dim;
    a.keys = {p(keys_twin), stride, offset, c.dim};
    a.candidates = {slots, first, count};
    a.mask = c.mask ? p(mask) : nullptr;
    a.mask_stride = stride_s;
    a.top_k = c.top_k;
    a.selected = p(selected);
    a.scores = with_scores ? p(scores) : nullptr;
    return a;
  };
  cpu_ops().IndexerTopK(args(false, true));  // the reference's scores judge near ties
  gpu_ops().IndexerTopK(args(true, c.scores));
  const std::vector<float> got = Get(selected);
  // Candidates tie by construction when they read the same key (duplicate runs) or when every
  // score is 0; elsewhere an exact tie of the reference's fp32 sums is a rounding coincidence.
  auto same_inputs = [&](int64_t row, int64_t a, int64_t b) {
    return c.all_zero || slots[first[row] + a] == slots[first[row] + b];
  };
  const int64_t differing = ExpectSameSelection(got, selected.host, scores.host, stride_s,
                                                c.top_k, 1e-5, same_inputs);
  RecordProperty("differing_places", static_cast<int>(differing));
  // Every score 0: the lower indices, exactly. (Duplicate keys' exact ties are checked place by
  // place above; near ties between different keys may still order either way.)
  if (c.all_zero) {
    EXPECT_EQ(got, selected.host);
  }
  if (c.scores) ExpectScores(Get(scores), scores.host, stride_s, 1e-5);
}

std::vector<int32_t> Range(int32_t from, int32_t to) {  // [from, to]
  std::vector<int32_t> v(to - from + 1);
  std::iota(v.begin(), v.end(), from);
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaDeepseekIndexerTest,
    ::testing::Values(
        IndexerCase{"FewerCandidatesThanTopK", 3, 8, 3, {{5}, {2}, {0}}},
        IndexerCase{"MaskDropsCandidates", 3, 8, 4, {{5, 9, 12}, {3}}, true, true},
        IndexerCase{
            "AllScoresZeroTieToLowerIndex", 3, 8, 6, {{9}, {4}}, false, false, true, 1, true},
        IndexerCase{"EqualKeysTieToLowerIndex", 4, 16, 7, {{20}, {13}}, false, true, true, 3},
        IndexerCase{"PrefillRowsShareAList", 5, 16, 8, {Range(1, 40), Range(0, 9)}, true, true},
        IndexerCase{"UnalignedKeys", 6, 12, 5, {Range(3, 12), {0, 0}, {7}}, false, true, false},
        IndexerCase{"ManyHeads", 70, 8, 4, {{33}, Range(30, 37)}, true, false},
        IndexerCase{"FlashDecode", 32, 128, 512, {{65536}, {65536}, {40000}, {300}}},
        IndexerCase{"FlashDecodeMasked", 32, 128, 512, {{65536}, {65536}}, true, true},
        // A mask without scores wanted: decode rows score only their unmasked candidates.
        IndexerCase{"MaskedDecodeRowsScoreOnlyUnmasked", 3, 8, 4, {{12}, {9}, {20}}, true},
        IndexerCase{"FlashDecodeBlockMask",
                    32,
                    128,
                    512,
                    {{65536}, {65536}, {100000}},
                    true,
                    false,
                    true,
                    1,
                    false,
                    0.03,
                    8},
        IndexerCase{"FlashPrefillLongListBlockMask",
                    32,
                    128,
                    512,
                    {Range(39993, 40000)},
                    true,
                    false,
                    true,
                    1,
                    false,
                    0.1,
                    8},
        IndexerCase{"FlashLongContext", 32, 128, 512, {{262144}}},
        IndexerCase{"FlashPrefill", 32, 128, 512, {Range(3841, 4096)}, false, true},
        IndexerCase{"FlashDuplicateKeys", 32, 128, 512, {{65536}, {65535}}, false, false, true, 4}),
    [](const auto& info) { return info.param.name; });

struct BlockCase {
  const char* name;
  std::vector<int32_t> count;
  int stride, block_size, top_blocks;
  float quantum;  // scores rounded to multiples of it (0: not): ties between block maxima
};

class CudaDeepseekCandidateBlockTest : public CudaDeepseekTest,
                                       public ::testing::WithParamInterface<BlockCase> {};

TEST_P(CudaDeepseekCandidateBlockTest, MaskEqualsTheReference) {
  const BlockCase& c = GetParam();
  const int64_t rows = static_cast<int64_t>(c.count.size());
  std::vector<float> scores = Random(rows * c.stride, 70);
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < c.stride; ++j) {
      float& s = scores[r * c.stride + j];
      if (c.quantum > 0) s = std::round(s / c.quantum) * c.quantum;
      if (j >= c.count[r]) s = -kInf;  // as IndexerTopK leaves them
    }
  }
  const Twin in = Both(scores);
  Twin mask = Both(std::vector<float>(rows * c.stride, 5.0f));
  cpu_ops().CandidateBlocks(
      {in.host.data(), c.count, c.stride, c.block_size, c.top_blocks, mask.h()});
  gpu_ops().CandidateBlocks(
      {in.dev.data(), c.count, c.stride, c.block_size, c.top_blocks, mask.d()});
  EXPECT_EQ(Get(mask), mask.host);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaDeepseekCandidateBlockTest,
    ::testing::Values(
        BlockCase{"StrideNotAMultiple", {10, 3, 0}, 10, 4, 2, 0.0f},
        BlockCase{"TiedBlocksToTheLower", {64, 61, 40}, 64, 4, 5, 0.5f},
        BlockCase{"MoreBlocksAskedThanExist", {30, 7}, 30, 8, 100, 0.0f},
        BlockCase{"NoBlocksAsked", {30}, 30, 8, 0, 0.0f},
        BlockCase{
            "FlashDecode", {65536, 65536, 60000, 5000, 1, 0, 65536, 32768}, 65536, 8, 2048, 0.01f},
        BlockCase{"FlashLongContext", {262144, 200000}, 262144, 8, 2048, 0.0f}),
    [](const auto& info) { return info.param.name; });

struct AttentionCase {
  const char* name;
  int heads, head_dim, window, block_size;
  std::vector<std::pair<int, int>> seqs;  // (query_len, context_len)
  int ratio = 0;  // 0: no compressed entries; else entries of `ratio` tokens
  int top_k = 0;  // 0: every candidate; else a selection of top_k places
  double minus_one = 0.0;
  bool aligned = true;
};

class CudaDeepseekSparseAttentionTest : public CudaDeepseekTest,
                                        public ::testing::WithParamInterface<AttentionCase> {};

// Sequences' blocks scattered over a shared pool; blocks no key is read from map to block 0
// (their rows hold random values too).
TEST_P(CudaDeepseekSparseAttentionTest, MatchesCpu) {
  const AttentionCase& c = GetParam();
  const int hd = c.head_dim, bs = c.block_size;
  const int offset = c.aligned ? 0 : 1, kv_width = 2 * hd + (c.aligned ? 4 : 3);
  std::mt19937 rng(80);
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSequence> seqs;
  std::vector<int64_t> slots, first;
  std::vector<int32_t> count;
  int32_t next_block = 1;
  int64_t start = 0;
  for (auto [query_len, context] : c.seqs) {
    // Which of the sequence's tokens are read: the queries' windows and the entries' tokens.
    const int blocks = (context + bs - 1) / bs;
    std::vector<bool> read(blocks, false);
    for (int p = std::max(0, context - query_len - c.window); p < context; ++p) read[p / bs] = true;
    for (int w = 0; c.ratio > 0 && w < context / c.ratio; ++w) {
      read[(w * c.ratio + c.ratio - 1) / bs] = true;
    }
    // Physical blocks: fresh ids in shuffled order for the read blocks, 0 for the others.
    const int n_read = static_cast<int>(std::count(read.begin(), read.end(), true));
    std::vector<int32_t> ids(n_read);
    std::iota(ids.begin(), ids.end(), next_block);
    std::shuffle(ids.begin(), ids.end(), rng);
    next_block += n_read;
    std::vector<int32_t> table(blocks, 0);
    for (int b = 0, k = 0; b < blocks; ++b) {
      if (read[b]) table[b] = ids[k++];
    }
    tables.push_back(table);
    const int64_t list = static_cast<int64_t>(slots.size());
    for (int w = 0; c.ratio > 0 && w < context / c.ratio; ++w) {
      const int tok = w * c.ratio + c.ratio - 1;
      slots.push_back(int64_t{tables.back()[tok / bs]} * bs + tok % bs);
    }
    for (int i = 0; i < query_len; ++i) {
      first.push_back(list);
      count.push_back(c.ratio > 0 ? (context - query_len + i + 1) / c.ratio : 0);
    }
    start += query_len;
  }
  start = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    seqs.push_back({start, c.seqs[s].first, c.seqs[s].second, tables[s]});
    start += c.seqs[s].first;
  }
  const int64_t rows = start;
  std::vector<float> selected;
  if (c.top_k > 0) {
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<float> picks(count[t]);
      std::iota(picks.begin(), picks.end(), 0.0f);
      std::shuffle(picks.begin(), picks.end(), rng);
      picks.resize(c.top_k, -1.0f);
      for (float& p : picks) {
        if (std::uniform_real_distribution<double>(0, 1)(rng) < c.minus_one) p = -1.0f;
      }
      selected.insert(selected.end(), picks.begin(), picks.end());
    }
  }
  Twin cache = Both(Random(int64_t{next_block} * bs * kv_width, 81));
  const Twin q = Both(Random(rows * c.heads * hd, 82));
  const Twin sinks = Both(Random(c.heads, 83, 2.0f));
  const Twin sel = Both(selected);
  Twin out = Both(std::vector<float>(rows * c.heads * hd, 99.0f));
  auto args = [&](bool device) {
    auto p = [&](const Twin& t) { return t.on(device); };
    float* base = cache.on(device);
    SparseAttentionArgs a;
    a.q = p(q);
    a.heads = c.heads;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.sequences = seqs;
    a.block_size = bs;
    a.window = c.window;
    a.window_keys = {base, kv_width, offset, hd};
    if (c.ratio > 0) {
      a.entries = {base, kv_width, offset + hd, hd};
      a.candidates = {slots, first, count};
    }
    a.selected = c.top_k > 0 ? p(sel) : nullptr;
    a.top_k = c.top_k;
    a.sinks = p(sinks);
    a.out = out.on(device);
    return a;
  };
  cpu_ops().SparseAttention(args(false));
  gpu_ops().SparseAttention(args(true));
  ExpectNear(Get(out), out.host, 1e-5);
}

// A decode step's few rows spread V4.1-Flash's 64 heads over more blocks (each reading the keys
// again) to fill the SMs; a prefill chunk keeps 8 heads a warp (each key read once a row).
TEST(SparseAttentionPlanTest, FewRowsSpreadHeadsOverBlocks) {
  const kernels::SparseAttentionPlan one = kernels::PlanSparseAttention(1, 64, 512, 640, 132);
  EXPECT_EQ(one.heads_per_warp, 1);
  EXPECT_EQ(one.head_blocks, 8);
  EXPECT_GE(one.head_blocks * one.splits, 64);
  const kernels::SparseAttentionPlan many = kernels::PlanSparseAttention(4096, 64, 512, 640, 132);
  EXPECT_EQ(many.heads_per_warp, 8);
  EXPECT_EQ(many.head_blocks, 1);
  EXPECT_EQ(many.splits, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaDeepseekSparseAttentionTest,
    ::testing::Values(
        // name, heads, head_dim, window, block_size, seqs, ratio, top_k, -1 fraction, aligned
        AttentionCase{"WindowOnly", 2, 8, 3, 2, {{3, 7}, {1, 2}, {1, 1}}},
        AttentionCase{"AllCandidates", 2, 8, 3, 2, {{3, 7}, {1, 2}}, 2},
        AttentionCase{"SelectedWithMinusOne", 2, 8, 3, 2, {{3, 9}, {2, 6}}, 1, 4, 0.3},
        AttentionCase{"SplitKeyList", 3, 12, 200, 16, {{1, 1000}}, 2, 0, 0.0},
        AttentionCase{"UnalignedFields", 5, 16, 64, 16, {{2, 300}, {1, 77}}, 1, 32, 0.1, false},
        AttentionCase{"TwentyHeads", 20, 32, 16, 16, {{3, 100}}, 1, 16, 0.0},
        AttentionCase{"TwoHeadBlocks", 70, 32, 16, 16, {{2, 100}}, 2, 8, 0.0},
        AttentionCase{
            "FlashDecodeB8",
            64,
            512,
            128,
            16,
            {{1, 4096}, {1, 4096}, {1, 4000}, {1, 4096}, {1, 3000}, {1, 4096}, {1, 129}, {1, 4096}},
            1,
            512,
            0.02},
        AttentionCase{"FlashDecodeB1", 64, 512, 128, 16, {{1, 4096}}, 1, 512, 0.0},
        AttentionCase{"FlashDecodeTp4", 16, 512, 128, 16, {{1, 4096}, {1, 2048}}, 2, 512, 0.0},
        AttentionCase{"FlashHcaAllCandidates", 64, 512, 128, 16, {{1, 65536}}, 128, 0, 0.0},
        AttentionCase{"FlashPrefillTp4", 16, 512, 128, 16, {{288, 4096}}, 2, 512, 0.01}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace spark::engine::backend::cuda
