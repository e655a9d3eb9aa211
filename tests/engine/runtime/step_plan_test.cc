#include "engine/runtime/step_plan.h"

#include <gtest/gtest.h>

namespace spark::engine::runtime {
namespace {

StepPlan Example() {
  StepPlan plan;
  plan.step = 12345678901ull;
  plan.entries.push_back({7, {1, 2, 3}, 0, {4, 5}, false});
  plan.entries.push_back({1ull << 40, {99}, 31, {0, 1, 2, 3, 4, 5, 6, 7}, true});
  plan.entries.push_back({3, {}, 0, {}, false});
  return plan;
}

TEST(StepPlanTest, RoundTrips) {
  const StepPlan plan = Example();
  const std::vector<uint8_t> bytes = plan.Serialize();
  // Header 17 bytes; entries 21 bytes each plus 4 per token and per block.
  EXPECT_EQ(bytes.size(), 17u + 3 * 21 + 4 * (3 + 2 + 1 + 8));
  auto back = StepPlan::Deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(back->num_tokens(), 4);
  EXPECT_EQ(back->num_logits_rows(), 1);
}

TEST(StepPlanTest, ShutdownRoundTrips) {
  StepPlan plan;
  plan.command = StepCommand::kShutdown;
  auto back = StepPlan::Deserialize(plan.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->command, StepCommand::kShutdown);
}

TEST(StepPlanTest, ArgMaxCommandRoundTripsAndUnknownCommandsAreDataLoss) {
  StepPlan plan = Example();
  plan.command = StepCommand::kRunArgMax;
  auto back = StepPlan::Deserialize(plan.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, plan);
  std::vector<uint8_t> bytes = plan.Serialize();
  bytes[4] = 5;  // the command byte, after the 4-byte magic
  EXPECT_EQ(StepPlan::Deserialize(bytes).status().code(), StatusCode::kDataLoss);
  StepPlan poll;
  poll.command = StepCommand::kMemoryPoll;
  auto poll_back = StepPlan::Deserialize(poll.Serialize());
  ASSERT_TRUE(poll_back.ok());
  EXPECT_EQ(poll_back->command, StepCommand::kMemoryPoll);
}

// A draft command: the anchor as its one token, the block size as num_draft_tokens, no logits.
TEST(StepPlanTest, DraftCommandRoundTripsAndIsChecked) {
  StepPlan plan;
  plan.command = StepCommand::kDraft;
  StepPlanEntry& e = plan.entries.emplace_back();
  e.token_ids = {42};
  e.start_pos = 17;
  e.block_table = {3, 9, 4, 8, 1};
  e.num_draft_tokens = 5;
  auto back = StepPlan::Deserialize(plan.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  plan.entries[0].num_draft_tokens = 17;  // beyond 16
  EXPECT_EQ(StepPlan::Deserialize(plan.Serialize()).status().code(), StatusCode::kDataLoss);
  plan.entries[0].num_draft_tokens = 5;
  plan.entries[0].token_ids = {42, 43};  // one anchor only
  EXPECT_EQ(StepPlan::Deserialize(plan.Serialize()).status().code(), StatusCode::kDataLoss);
  // In a run plan the same entry is malformed: drafts need logits and a token before them.
  plan.command = StepCommand::kRun;
  plan.entries[0].token_ids = {42};
  EXPECT_EQ(StepPlan::Deserialize(plan.Serialize()).status().code(), StatusCode::kDataLoss);
}

TEST(StepPlanTest, EveryTruncationIsDataLoss) {
  const std::vector<uint8_t> bytes = Example().Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_EQ(StepPlan::Deserialize(cut).status().code(), StatusCode::kDataLoss) << n;
  }
}

TEST(StepPlanTest, GarbageIsDataLoss) {
  std::vector<uint8_t> bytes = Example().Serialize();
  bytes.push_back(0);
  EXPECT_EQ(StepPlan::Deserialize(bytes).status().code(), StatusCode::kDataLoss);
  bytes = Example().Serialize();
  bytes[0] ^= 0xff;
  EXPECT_EQ(StepPlan::Deserialize(bytes).status().code(), StatusCode::kDataLoss);
  bytes = Example().Serialize();
  bytes[13] = 0xff;  // Entry count's high byte.
  EXPECT_EQ(StepPlan::Deserialize(bytes).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace spark::engine::runtime
