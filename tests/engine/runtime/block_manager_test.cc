#include "engine/runtime/block_manager.h"

#include <gtest/gtest.h>

namespace spark::engine::runtime {
namespace {

constexpr int kBs = 4;

std::vector<int32_t> Tokens(int n, int32_t base) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(base + i);
  return t;
}

Sequence Seq(uint64_t id, std::vector<int32_t> tokens) {
  return Sequence(id, std::move(tokens), SamplingParams{}, 0);
}

// Allocates for all of seq's tokens and marks them computed (as after a prefill).
void Prefill(BlockManager& bm, Sequence& seq) {
  const int hit = bm.MatchPrefix(seq);
  seq.set_num_computed_tokens(hit);
  ASSERT_TRUE(bm.Append(seq, seq.num_uncomputed_tokens()).ok());
  seq.set_num_computed_tokens(seq.num_tokens());
  bm.CommitComputed(seq);
}

TEST(BlockManagerTest, AppendAndFreeAccountForEveryBlock) {
  BlockManager bm({.num_blocks = 10, .block_size = kBs, .enable_prefix_caching = false});
  Sequence a = Seq(1, Tokens(9, 0));
  EXPECT_EQ(bm.BlocksNeeded(a, 9), 3);
  ASSERT_TRUE(bm.Append(a, 9).ok());
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_FLOAT_EQ(bm.usage(), 0.3f);
  a.set_num_computed_tokens(9);
  EXPECT_EQ(bm.BlocksNeeded(a, 3), 0);  // Slots 9..11 are in block 2.
  EXPECT_EQ(bm.BlocksNeeded(a, 4), 1);
  Sequence b = Seq(2, Tokens(30, 0));
  EXPECT_FALSE(bm.CanAppend(b, 30));
  EXPECT_EQ(bm.Append(b, 30).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  bm.Free(a);
  EXPECT_TRUE(a.block_table().empty());
  EXPECT_EQ(bm.num_free_blocks(), 10);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
}

TEST(BlockManagerTest, SharedPrefixHitsFullBlocksOnly) {
  BlockManager bm({.num_blocks = 16, .block_size = kBs});
  Sequence a = Seq(1, Tokens(10, 100));  // Blocks [100..103] [104..107] + 2 tokens.
  Prefill(bm, a);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  std::vector<int32_t> tb = Tokens(8, 100);
  tb.push_back(5);
  Sequence b = Seq(2, tb);
  EXPECT_EQ(bm.MatchPrefix(b), 8);
  EXPECT_EQ(b.block_table()[0], a.block_table()[0]);
  EXPECT_EQ(b.block_table()[1], a.block_table()[1]);
  bm.Free(b);
  bm.Free(a);
  EXPECT_EQ(bm.num_free_blocks(), 16);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // Still cached after everyone left.
}

TEST(BlockManagerTest, NeverCoversTheLastToken) {
  BlockManager bm({.num_blocks = 16, .block_size = kBs});
  Sequence a = Seq(1, Tokens(8, 0));
  Prefill(bm, a);
  bm.Free(a);
  Sequence b = Seq(2, Tokens(8, 0));  // Exactly the same two full blocks.
  EXPECT_EQ(bm.MatchPrefix(b), 4);
}

TEST(BlockManagerTest, DifferentEarlierBlockMeansNoHit) {
  BlockManager bm({.num_blocks = 16, .block_size = kBs});
  Sequence a = Seq(1, Tokens(12, 0));
  Prefill(bm, a);
  std::vector<int32_t> t = Tokens(12, 0);
  t[0] = 99;  // Same second block, different first: chained hashes differ.
  Sequence b = Seq(2, t);
  EXPECT_EQ(bm.MatchPrefix(b), 0);
}

TEST(BlockManagerTest, SharedBlocksAreRefCounted) {
  BlockManager bm({.num_blocks = 8, .block_size = kBs});
  Sequence a = Seq(1, Tokens(9, 0));
  Prefill(bm, a);  // 3 blocks.
  Sequence b = Seq(2, Tokens(9, 0));
  Prefill(bm, b);  // Shares 2, adds 1.
  EXPECT_EQ(bm.num_free_blocks(), 4);
  bm.Free(a);
  EXPECT_EQ(bm.num_free_blocks(), 5);  // Shared blocks still held by b.
  bm.Free(b);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST(BlockManagerTest, EvictsLeastRecentlyFreedCachedBlocksLast) {
  BlockManager bm({.num_blocks = 4, .block_size = kBs});
  Sequence a = Seq(1, Tokens(5, 0));   // 1 full block (cached) + 1 partial.
  Sequence b = Seq(2, Tokens(5, 50));  // Same.
  Prefill(bm, a);
  Prefill(bm, b);
  bm.Free(a);  // a's cached block is older in the LRU.
  bm.Free(b);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  // Needs 3 blocks: 2 plain free blocks, then the LRU cached one (a's) is evicted.
  Sequence c = Seq(3, Tokens(12, 200));
  ASSERT_TRUE(bm.Append(c, 12).ok());
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  bm.Free(c);
  Sequence a2 = Seq(4, Tokens(5, 0));
  Sequence b2 = Seq(5, Tokens(5, 50));
  EXPECT_EQ(bm.MatchPrefix(a2), 0);
  EXPECT_EQ(bm.MatchPrefix(b2), 4);
}

TEST(BlockManagerTest, DecodeGrowthCachesNewlyFullBlocks) {
  BlockManager bm({.num_blocks = 8, .block_size = kBs});
  Sequence a = Seq(1, Tokens(3, 0));
  Prefill(bm, a);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  a.AppendToken(3);  // Generated token: 4 tokens, the 4th not yet computed.
  ASSERT_TRUE(bm.Append(a, 1).ok());
  a.set_num_computed_tokens(4);
  bm.CommitComputed(a);
  EXPECT_EQ(bm.num_cached_blocks(), 1);
}

TEST(BlockManagerTest, PrefixLookupCounters) {
  BlockManager bm({.num_blocks = 8, .block_size = kBs});
  bm.RecordPrefixLookup(10, 4);
  bm.RecordPrefixLookup(6, 0);
  EXPECT_EQ(bm.prefix_queries(), 16u);
  EXPECT_EQ(bm.prefix_hits(), 4u);
}

}  // namespace
}  // namespace spark::engine::runtime
