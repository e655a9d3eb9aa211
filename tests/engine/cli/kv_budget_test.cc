// The KV cache sized from memory (--kv-memory-fraction): blocks from the fraction of what the
// node has available, and MemAvailable read from a meminfo file.
#include "engine/cli/kv_budget.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST(KvBudgetTest, ReadsMemAvailableFromMeminfo) {
  const std::string path = ::testing::TempDir() + "/kv_budget_meminfo";
  {
    std::ofstream out(path);
    out << "MemTotal:       127601424 kB\nMemFree:         1000 kB\n"
           "MemAvailable:   98765432 kB\nBuffers:           0 kB\n";
  }
  auto bytes = ReadMemAvailable(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_EQ(*bytes, int64_t{98765432} * 1024);
  { std::ofstream(path) << "MemTotal: 1 kB\n"; }
  EXPECT_EQ(ReadMemAvailable(path).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadMemAvailable(path + ".missing").status().code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace spark::engine::cli
