// CpuDeepseekOps' lightning indexer, sparse attention and grouped projection against naive
// references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "tests/engine/backend/deepseek_test_util.h"

namespace spark::engine::backend::cpu {
namespace {

using testing::ExpectClose;
using testing::FakeCache;
using testing::Random;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Three queries: 5 candidates (more than top_k), 2 (fewer) and 0.
struct Indexer {
  static constexpr int kHeads = 3, kDim = 8, kTopK = 3, kTokens = 3;
  FakeCache cache{16, kDim, 20};
  std::vector<float> q = Random(kTokens * kHeads * kDim, 21);
  std::vector<float> w = Random(kTokens * kHeads, 22);
  std::vector<int64_t> slots = {9, 2, 14, 5, 11};
  std::vector<int64_t> first = {0, 0, 0};
  std::vector<int32_t> count = {5, 2, 0};
  std::vector<float> mask;
  std::vector<float> selected = std::vector<float>(kTokens * kTopK, 99.0f);

  IndexerArgs Args() {
    return {q.data(),
            w.data(),
            0.5f,
            kHeads,
            kDim,
            cache.Field(0, kDim),
            {slots, first, count},
            mask.empty() ? nullptr : mask.data(),
            5,
            kTopK,
            selected.data()};
  }
  // Scores in double, then the top-k by (score desc, index asc) without -inf; -1 padded.
  std::vector<float> Reference() {
    std::vector<float> out;
    for (int t = 0; t < kTokens; ++t) {
      std::vector<double> s(count[t]);
      for (int c = 0; c < count[t]; ++c) {
        const float* key = cache.data.data() + slots[first[t] + c] * kDim;
        for (int h = 0; h < kHeads; ++h) {
          double dot = 0;
          for (int i = 0; i < kDim; ++i) dot += double{q[(t * kHeads + h) * kDim + i]} * key[i];
          s[c] += std::max(dot, 0.0) / std::sqrt(double{kDim}) * w[t * kHeads + h] * 0.5;
        }
        if (!mask.empty()) s[c] += mask[t * 5 + c];
      }
      std::vector<int> order(count[t]);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
      for (int i = 0; i < kTopK; ++i) {
        const bool keep = i < count[t] && s[order[i]] != -INFINITY;
        out.push_back(keep ? static_cast<float>(order[i]) : -1.0f);
      }
    }
    return out;
  }
};

TEST(CpuDeepseekOpsTest, IndexerTopKKeepsTheBestCandidatesPaddedWithMinusOne) {
  CpuBackend backend(2);
  Indexer x;
  backend.deepseek_ops()->IndexerTopK(x.Args());
  EXPECT_EQ(x.selected, x.Reference());
  EXPECT_EQ(x.selected[3 * 1 + 2], -1.0f);  // 2 candidates for 3 places
  EXPECT_EQ(x.selected[3 * 2], -1.0f);      // none
}

// ReLU scores tie at 0 (every key opposite every query), and two keys are equal: ties go to the
// lower candidate index.
TEST(CpuDeepseekOpsTest, IndexerTopKTiesGoToTheLowerIndex) {
  CpuBackend backend(1);
  Indexer x;
  x.q.assign(x.q.size(), 1.0f);
  for (float& v : x.cache.data) v = -std::fabs(v);
  backend.deepseek_ops()->IndexerTopK(x.Args());
  EXPECT_EQ(std::vector<float>(x.selected.begin(), x.selected.begin() + 3),
            (std::vector<float>{0, 1, 2}));
  // Candidates 1 and 3 share one key that beats every other: 1 first, then 3.
  std::fill_n(x.w.begin(), Indexer::kHeads, 1.0f);
  for (int i = 0; i < Indexer::kDim; ++i) {
    x.cache.data[x.slots[1] * Indexer::kDim + i] = 1.0f;
    x.cache.data[x.slots[3] * Indexer::kDim + i] = 1.0f;
  }
  backend.deepseek_ops()->IndexerTopK(x.Args());
  EXPECT_EQ(x.selected[0], 1.0f);
  EXPECT_EQ(x.selected[1], 3.0f);
  EXPECT_EQ(x.selected, x.Reference());
}

TEST(CpuDeepseekOpsTest, IndexerTopKMaskShiftsAndDropsCandidates) {
  CpuBackend backend(2);
  Indexer x;
  x.mask = Random(Indexer::kTokens * 5, 23, 0.3f);
  x.mask[0] = x.mask[2] = x.mask[3] = x.mask[4] = kMinusInf;  // query 0 keeps only candidate 1
  backend.deepseek_ops()->IndexerTopK(x.Args());
  EXPECT_EQ(x.selected, x.Reference());
  EXPECT_EQ(std::vector<float>(x.selected.begin(), x.selected.begin() + 3),
            (std::vector<float>{1, -1, -1}));
}

// Two sequences with scrambled block tables; window 3; entries from the candidate lists,
// narrowed by a selection or not; random sinks.
struct Attention {
  static constexpr int kHeads = 2, kDim = 8, kBlock = 2, kWindow = 3, kTopK = 2;
  FakeCache cache{24, 2 * kDim, 30};  // window key | entry
  std::vector<int32_t> table0 = {5, 1, 9, 3}, table1 = {7, 0, 11};
  // Sequence 0: 3 new tokens at 4..6; sequence 1: one token at position 1 (a short window).
  std::vector<AttentionSequence> seqs = {{0, 3, 7, table0}, {3, 1, 2, table1}};
  std::vector<float> q = Random(4 * kHeads * kDim, 31);
  std::vector<float> sinks = {0.5f, 2.5f};
  std::vector<int64_t> slots = {4, 17, 22, 9};  // sequence 0's entries, then sequence 1's
  std::vector<int64_t> first = {0, 0, 0, 3};
  std::vector<int32_t> count = {2, 3, 3, 1};
  std::vector<float> selected = {1, -1, 2, 0, -1, -1, 0, -1};

  int64_t Slot(const std::vector<int32_t>& t, int64_t pos) const {
    return int64_t{t[pos / kBlock]} * kBlock + pos % kBlock;
  }
  // Keys of query `row` (position p, table t) in the op's order, then the naive softmax.
  std::vector<double> Reference(bool use_selection, bool use_entries) const {
    std::vector<double> out;
    const int rows[4][2] = {{4, 0}, {5, 0}, {6, 0}, {1, 1}};
    for (int row = 0; row < 4; ++row) {
      const auto& t = rows[row][1] == 0 ? table0 : table1;
      std::vector<const float*> keys;
      for (int64_t j = std::max(0, rows[row][0] - kWindow + 1); j <= rows[row][0]; ++j) {
        keys.push_back(cache.data.data() + Slot(t, j) * 2 * kDim);
      }
      for (int i = 0; use_entries && i < (use_selection ? kTopK : count[row]); ++i) {
        const int pick = use_selection ? static_cast<int>(selected[row * kTopK + i]) : i;
        if (pick >= 0)
          keys.push_back(cache.data.data() + slots[first[row] + pick] * 2 * kDim + kDim);
      }
      for (int h = 0; h < kHeads; ++h) {
        std::vector<double> logits;
        for (const float* k : keys) {
          double dot = 0;
          for (int i = 0; i < kDim; ++i) dot += double{q[(row * kHeads + h) * kDim + i]} * k[i];
          logits.push_back(dot / std::sqrt(double{kDim}));
        }
        logits.push_back(sinks[h]);
        const std::vector<double> p = testing::SoftmaxRef(logits);
        for (int i = 0; i < kDim; ++i) {
          double o = 0;
          for (size_t k = 0; k < keys.size(); ++k) o += p[k] * keys[k][i];
          out.push_back(o);
        }
      }
    }
    return out;
  }
  std::vector<float> Run(Backend& backend, bool use_selection, bool use_entries) {
    std::vector<float> out(4 * kHeads * kDim, 99.0f);
    backend.deepseek_ops()->SparseAttention(
        {.q = q.data(),
         .heads = kHeads,
         .head_dim = kDim,
         .scale = 1.0f / std::sqrt(static_cast<float>(kDim)),
         .sequences = seqs,
         .block_size = kBlock,
         .window = kWindow,
         .window_keys = cache.Field(0, kDim),
         .entries = cache.Field(kDim, kDim),
         .candidates = use_entries ? EntryCandidates{slots, first, count} : EntryCandidates{},
         .selected = use_selection ? selected.data() : nullptr,
         .top_k = kTopK,
         .sinks = sinks.data(),
         .out = out.data()});
    return out;
  }
};

struct AttentionCase {
  const char* name;
  bool selection, entries;
};

class CpuDeepseekAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuDeepseekAttentionTest, MatchesNaiveSoftmaxWithSink) {
  CpuBackend backend(3);
  Attention a;
  const std::vector<float> got = a.Run(backend, GetParam().selection, GetParam().entries);
  ExpectClose(got, a.Reference(GetParam().selection, GetParam().entries), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CpuDeepseekAttentionTest,
                         ::testing::Values(AttentionCase{"WindowOnly", false, false},
                                           AttentionCase{"AllCandidates", false, true},
                                           AttentionCase{"Selected", true, true}),
                         [](const auto& info) { return info.param.name; });

// A sink of +inf-like weight leaves almost nothing: the sink adds probability, not value.
TEST(CpuDeepseekOpsTest, SparseAttentionSinkTakesMassButAddsNoValue) {
  CpuBackend backend(1);
  Attention a;
  a.sinks = {40.0f, 40.0f};
  for (float v : a.Run(backend, true, true)) EXPECT_LT(std::fabs(v), 1e-12f);
}

TEST(CpuDeepseekOpsTest, GroupedLinearProjectsEachGroupThroughItsBlock) {
  CpuBackend backend(2);
  const int rows = 3, out = 4;
  const std::vector<int> group_in = {6, 10, 4};
  const std::vector<float> x = Random(rows * 20, 40), w = Random(out * 20, 41);
  std::vector<float> y(rows * 3 * out, 99.0f);
  backend.deepseek_ops()->GroupedLinear(x.data(), rows, group_in, w.data(), out, y.data());
  std::vector<double> want;
  for (int r = 0; r < rows; ++r) {
    int column = 0, block = 0;
    for (int in : group_in) {
      for (int o = 0; o < out; ++o) {
        double s = 0;
        for (int i = 0; i < in; ++i) s += double{x[r * 20 + column + i]} * w[block + o * in + i];
        want.push_back(s);
      }
      column += in;
      block += out * in;
    }
  }
  ExpectClose(y, want, 1e-5);
}

}  // namespace
}  // namespace spark::engine::backend::cpu
