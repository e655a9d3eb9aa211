// The KV cache sized from memory (--kv-memory-fraction): blocks from the fraction of what the
// node has available, never into the memory the start-up floor keeps.
#include "engine/cli/kv_budget.h"

#include <gtest/gtest.h>

namespace spark::engine::cli {
namespace {

TEST(KvBudgetTest, BlocksAreTheFractionOfAvailableMemoryRoundedDown) {
  // 0.5 of 1 GiB at 1 KiB per token and 16 tokens per block: 512 MiB / 16 KiB = 32768 blocks.
  auto blocks = KvBlocksFromMemory(0.5, int64_t{1} << 30, 1024, 16);
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  EXPECT_EQ(*blocks, 32768);
  // One byte short of the next block stays at the lower count.
  blocks = KvBlocksFromMemory(0.5, 2 * (3 * 16 * 1024) - 2, 1024, 16);
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(*blocks, 2);
}

TEST(KvBudgetTest, TooLittleMemoryIsResourceExhaustedWithTheFigures) {
  auto blocks = KvBlocksFromMemory(0.1, 100 * 1024, 1024, 16);
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = blocks.status().message();
  EXPECT_NE(m.find("--kv-memory-fraction 0.1 of the 100.0 KiB available"), std::string::npos) << m;
  EXPECT_NE(m.find("--num-kv-blocks"), std::string::npos) << m;
}

TEST(KvBudgetTest, FractionOutsideTheRangeIsRefused) {
  for (double f : {0.0, -0.5, 0.95, 1.0}) {
    auto blocks = KvBlocksFromMemory(f, int64_t{1} << 30, 1024, 16);
    ASSERT_FALSE(blocks.ok()) << f;
    EXPECT_EQ(blocks.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(blocks.status().message().find("must be in (0, 0.9]"), std::string::npos);
  }
}

TEST(KvBudgetTest, TheFloorStaysFreeWhateverTheFraction) {
  // 0.9 of 1 GiB would be 921.6 MiB; keeping 512 MiB leaves 512 MiB: 32768 blocks of 16 KiB.
  auto blocks = KvBlocksFromMemory(0.9, int64_t{1} << 30, 1024, 16, int64_t{512} << 20);
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  EXPECT_EQ(*blocks, 32768);
  auto none = KvBlocksFromMemory(0.9, int64_t{1} << 30, 1024, 16, int64_t{1} << 30);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("kept free (the start-up floor"), std::string::npos)
      << none.status().message();
}

}  // namespace
}  // namespace spark::engine::cli
