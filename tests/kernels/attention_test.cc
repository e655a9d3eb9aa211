// Paged attention against a float64 reference on random caches with scrambled block tables:
// decode with and without split-K (contexts up to 5000 tokens), prefill tiles across sequence
// boundaries, GQA groups of 1, 4 and 12 (more than one head chunk), head_dim 16..256.
// fp32 within 1e-5 relative (L2); bf16 caches within 1e-2; fp32 queries over a bf16 cache (the
// engine's bf16 KV cache) within 1e-5 of the reference on the cache's rounded values. With tensor
// cores on, decode rows over a bf16 cache run the tensor-core decode kernel (head_dim 64 and 128,
// up to 16 query heads per KV head; split contexts and empty splits included), also within 1e-2. The bf16
// tensor-core prefill (head_dim 64 and 128; other sizes fall back to the fp32 kernel) within 1e-2
// for both cache types, against the same float64 reference; long prefills cover several 64-token KV
// tiles, 128-row query tiles, partial tiles and chunked prefill that starts mid-sequence.
#include "kernels/attention.h"

#include <numeric>

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

struct Seq {
  int query_len;
  int context_len;
};

struct Case {
  int heads, kv_heads, head_dim, block_size;
  std::vector<Seq> seqs;
};

// Builds block tables (a random permutation of the cache blocks), writes K/V for every
// context token, runs the reference, then the kernels (decode rows for query_len 1, prefill
// tiles otherwise), as the CUDA backend splits them. T: queries and outputs, C: the cache.
template <typename T, typename C = T>
double RunCase(const Case& c, uint32_t seed, bool tensor_cores = false) {
  const int D = c.head_dim, kv_width = c.kv_heads * D;
  int total_blocks = 0, total_rows = 0;
  for (const Seq& s : c.seqs) {
    total_blocks += (s.context_len + c.block_size - 1) / c.block_size;
    total_rows += s.query_len;
  }
  std::vector<int32_t> perm(total_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  const size_t slots = size_t{static_cast<size_t>(total_blocks)} * c.block_size;
  auto k = Random(slots * kv_width, seed + 1), v = Random(slots * kv_width, seed + 2);
  auto q = Random(size_t{static_cast<size_t>(total_rows)} * c.heads * D, seed + 3);
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  constexpr bool kBf16Cache = std::is_same_v<C, __nv_bfloat16>;
  if (kBf16) {
    for (float& f : q) f = RoundBf16(f);
  }
  if (kBf16Cache) {
    for (auto* a : {&k, &v})
      for (float& f : *a) f = RoundBf16(f);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<double> want(q.size());
  std::vector<int32_t> tables, row_ids, kv_len, offsets;
  std::vector<PrefillTile> tiles;
  int max_len = 0, row = 0, block = 0;
  for (const Seq& s : c.seqs) {
    const int offset = static_cast<int>(tables.size());
    const int nb = (s.context_len + c.block_size - 1) / c.block_size;
    for (int b = 0; b < nb; ++b) tables.push_back(perm[block++]);
    const int group = c.heads / c.kv_heads;
    for (int i = 0; i < s.query_len; ++i) {
      const int visible = s.context_len - s.query_len + i + 1;
      for (int h = 0; h < c.heads; ++h) {
        std::vector<double> sc(visible);
        double mx = -1e300;
        for (int j = 0; j < visible; ++j) {
          const int64_t slot =
              int64_t{tables[offset + j / c.block_size]} * c.block_size + j % c.block_size;
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += double{q[((row + i) * c.heads + h) * D + d]} *
                   k[slot * kv_width + (h / group) * D + d];
          sc[j] = dot * scale;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (double& x : sc) sum += x = std::exp(x - mx);
        for (int j = 0; j < visible; ++j) {
          const int64_t slot =
              int64_t{tables[offset + j / c.block_size]} * c.block_size + j % c.block_size;
          for (int d = 0; d < D; ++d)
            want[((row + i) * c.heads + h) * D + d] +=
                sc[j] / sum * v[slot * kv_width + (h / group) * D + d];
        }
      }
    }
    if (s.query_len == 1) {
      row_ids.push_back(row);
      kv_len.push_back(s.context_len);
      offsets.push_back(offset);
      max_len = std::max(max_len, s.context_len);
    } else {
      for (int i = 0; i < s.query_len; i += kPrefillTileRows) {
        tiles.push_back({row + i, std::min(kPrefillTileRows, s.query_len - i),
                         s.context_len - s.query_len + i + 1, offset});
      }
    }
    row += s.query_len;
  }
  auto to_c = [](const std::vector<float>& a) {
    if constexpr (kBf16Cache)
      return ToBf16(a);
    else
      return a;
  };
  std::vector<T> q_t;
  if constexpr (kBf16)
    q_t = ToBf16(q);
  else
    q_t = q;
  DeviceArray<T> dq(q_t), dout(q.size());
  DeviceArray<C> dk(to_c(k)), dv(to_c(v));
  DeviceArray<int32_t> dtables(tables), drows(row_ids), dlen(kv_len), doff(offsets);
  std::vector<int32_t> tile_words(tiles.size() * 4);
  std::memcpy(tile_words.data(), tiles.data(), tile_words.size() * sizeof(int32_t));
  DeviceArray<int32_t> dtiles(tile_words);
  const PagedKvLayout layout{c.heads, c.kv_heads, D, c.block_size, scale, tensor_cores};
  if (!row_ids.empty()) {
    DecodeRows rows{
        drows.get(), dlen.get(), doff.get(), dtables.get(), static_cast<int64_t>(row_ids.size()),
        max_len};
    const DecodeSplit plan = PlanDecodeSplit(rows, layout, 132, sizeof(C) == 2);
    DeviceArray<float> ws(plan.workspace_floats);
    const Status s = PagedDecodeAttention<T, C>(dq.get(), rows, dk.get(), dv.get(), layout, plan,
                                                ws.get(), dout.get(), nullptr);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  if (!tiles.empty()) {
    const Status s = PagedPrefillAttention<T, C>(
        dq.get(), reinterpret_cast<PrefillTile*>(dtiles.get()), static_cast<int>(tiles.size()),
        dtables.get(), dk.get(), dv.get(), layout, dout.get(), nullptr);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  std::vector<float> got;
  if constexpr (kBf16)
    got = ToFloat(dout.Host());
  else
    got = dout.Host();
  return RelL2(got, want);
}

// A decode batch whose blocks fill the 132 SMs the test plans for (70 rows x 2 KV heads = 140,
// no split), where the tensor-core kernel runs three pipeline stages on GPUs with the shared
// memory (H200): contexts of 1 to 450 tokens (1 to 8 tiles).
Case ManyDecodeRows() {
  Case c{8, 2, 128, 16, {}};
  const int lens[] = {1, 64, 65, 130, 200, 257, 300, 450};
  for (int i = 0; i < 70; ++i) c.seqs.push_back({1, lens[i % 8]});
  return c;
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, Fp32MatchesReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT(RunCase<float>(GetParam(), 31), 1e-5);
}

TEST_P(AttentionTest, Bf16MatchesReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT(RunCase<__nv_bfloat16>(GetParam(), 32), 1e-2);
}

TEST_P(AttentionTest, Fp32QueriesOverBf16CacheMatchReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT((RunCase<float, __nv_bfloat16>(GetParam(), 35)), 1e-5);
}

TEST_P(AttentionTest, TensorCoresFp32QueriesOverBf16CacheMatchReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT((RunCase<float, __nv_bfloat16>(GetParam(), 36, /*tensor_cores=*/true)), 1e-2);
}

TEST_P(AttentionTest, TensorCorePrefillFp32CacheMatchesReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT(RunCase<float>(GetParam(), 33, /*tensor_cores=*/true), 1e-2);
}

TEST_P(AttentionTest, TensorCoresBf16CacheMatchReference) {
  SPARK_SKIP_WITHOUT_GPU();
  EXPECT_LT(RunCase<__nv_bfloat16>(GetParam(), 34, /*tensor_cores=*/true), 1e-2);
}

// The planner marks a batch whose blocks fill the SMs before any split (the tensor-core decode
// kernel's cue for three stages, which ManyDecodeRows above must reach), and not batch 1.
TEST(DecodeSplitTest, FullGridOnlyWhenTheRowsFillEverySm) {
  const PagedKvLayout layout{8, 2, 128, 16, 1.0f, /*bf16_tensor_cores=*/true};
  DecodeRows many;
  many.rows = 70;
  many.max_kv_len = 450;
  const DecodeSplit full = PlanDecodeSplit(many, layout, 132, /*bf16_cache=*/true);
  EXPECT_TRUE(full.full_grid);
  EXPECT_EQ(full.splits, 1);
  DecodeRows one = many;
  one.rows = 1;
  const DecodeSplit single = PlanDecodeSplit(one, layout, 132, /*bf16_cache=*/true);
  EXPECT_FALSE(single.full_grid);
  EXPECT_GT(single.splits, 1);
}

// The kernel's shared-memory opt-in is per device: the tensor-core path on every GPU.
TEST(AttentionDevicesTest, TensorCorePrefillRunsOnEveryDevice) {
  SPARK_SKIP_WITHOUT_GPU();
  const Case c{8, 2, 128, 16, {{100, 100}}};
  for (int d = 0; d < CudaDeviceCount(); ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    EXPECT_LT(RunCase<__nv_bfloat16>(c, 40 + d, /*tensor_cores=*/true), 1e-2) << "device " << d;
  }
  cudaSetDevice(0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(
        // Decode only: short (one split) and long contexts (split-K), GQA group 4.
        Case{8, 2, 128, 16, {{1, 1}, {1, 7}, {1, 300}, {1, 5000}}},
        // Decode, MQA with a group of 12 (two head chunks), head_dim 64.
        Case{12, 1, 64, 32, {{1, 2000}, {1, 33}}},
        // Prefill from empty caches and continued (chunked) prefill, head_dim 16, MHA.
        Case{4, 4, 16, 4, {{37, 37}, {5, 20}, {16, 16}}},
        // Mixed batch: prefill tiles and decode rows together, head_dim 256, group 2.
        Case{4, 2, 256, 16, {{40, 100}, {1, 77}, {3, 3}}},
        // head_dim 96 (lanes past the head idle), group 3.
        Case{6, 2, 96, 8, {{1, 1500}, {20, 60}}},
        // Long prefills, head_dim 128, group 4: several KV tiles, a tile tail of 8 rows, a
        // chunk that starts at token 130 of its sequence, and a decode row beside them.
        Case{8, 2, 128, 16, {{200, 200}, {70, 200}, {1, 90}, {65, 65}, {136, 136}}},
        // head_dim 64, MQA group 6, block size 32: prefills of exactly one tile, half a tile
        // (only the first row group of each warp has rows) and one tile plus two rows.
        Case{6, 1, 64, 32, {{128, 128}, {64, 64}, {130, 300}}},
        // Decode rows enough to fill every SM (three pipeline stages on the H200).
        ManyDecodeRows()));

}  // namespace
}  // namespace spark::kernels
