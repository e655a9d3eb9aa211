#include "engine/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace spark::engine::runtime {
namespace {

constexpr int kBs = 4;

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int num_blocks, SchedulerOptions options, bool prefix = true) {
    blocks_ = std::make_unique<BlockManager>(BlockManagerOptions{num_blocks, kBs, prefix});
    scheduler_ = std::make_unique<Scheduler>(options, blocks_.get());
  }
  Sequence* Add(int len, int32_t base = 0) {
    std::vector<int32_t> t;
    for (int i = 0; i < len; ++i) t.push_back(base + i);
    seqs_.push_back(std::make_unique<Sequence>(seqs_.size(), t, SamplingParams{}, 0));
    scheduler_->Add(seqs_.back().get());
    return seqs_.back().get();
  }
  // Runs one step as the engine would, appending token 1 to sequences that got logits.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_->Schedule();
    scheduler_->Commit(out);
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      if (out.plan.entries[i].needs_logits) out.scheduled[i].seq->AppendToken(1);
    }
    return out;
  }

  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(SchedulerTest, LongPromptIsChunkedAcrossSteps) {
  Init(64, {.max_num_seqs = 8, .max_num_batched_tokens = 16});
  Add(50);
  std::vector<std::pair<int, int>> chunks;  // (start, count)
  std::vector<bool> logits;
  for (int i = 0; i < 4; ++i) {
    SchedulerOutput out = Step();
    ASSERT_EQ(out.plan.entries.size(), 1u);
    chunks.push_back({out.plan.entries[0].start_pos, int(out.plan.entries[0].token_ids.size())});
    logits.push_back(out.plan.entries[0].needs_logits);
  }
  EXPECT_EQ(chunks, (std::vector<std::pair<int, int>>{{0, 16}, {16, 16}, {32, 16}, {48, 2}}));
  EXPECT_EQ(logits, (std::vector<bool>{false, false, false, true}));
  SchedulerOutput decode = Step();
  EXPECT_EQ(decode.plan.entries[0].start_pos, 50);
  EXPECT_EQ(decode.plan.entries[0].token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(decode.plan.entries[0].block_table.size(), 13u);  // 51 positions.
}

TEST_F(SchedulerTest, WithoutChunkingAPromptWaitsForAFullBudget) {
  Init(64, {.max_num_seqs = 8,
            .max_num_batched_tokens = 20,
            .enable_chunked_prefill = false,
            .max_model_len = 20});
  Add(12);
  Add(12, 100);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.plan.entries.size(), 1u);  // 12 + 12 > 20: the second waits.
  out = Step();
  ASSERT_EQ(out.plan.entries.size(), 2u);  // Decode of the first + prefill of the second.
  EXPECT_EQ(out.plan.entries[0].token_ids.size(), 1u);
  EXPECT_EQ(out.plan.entries[1].token_ids.size(), 12u);
}

TEST_F(SchedulerTest, RunningDecodesComeBeforeNewPrefills) {
  Init(64, {.max_num_seqs = 8, .max_num_batched_tokens = 32});
  Sequence* a = Add(5);
  Step();
  Sequence* b = Add(7, 100);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].seq, a);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[1].seq, b);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 7);
}

TEST_F(SchedulerTest, MaxNumSeqsCapsTheBatch) {
  Init(64, {.max_num_seqs = 2, .max_num_batched_tokens = 100});
  for (int i = 0; i < 5; ++i) Add(3, 10 * i);
  SchedulerOutput out = Step();
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(scheduler_->num_waiting(), 3);
}

TEST_F(SchedulerTest, NewestRunningSequenceIsPreemptedAndResumesFirst) {
  Init(6, {.max_num_seqs = 8, .max_num_batched_tokens = 100}, false);
  Sequence* a = Add(8);  // 2 blocks each, then both grow.
  Sequence* b = Add(8, 100);
  Sequence* c = Add(7, 200);
  SchedulerOutput out = Step();  // a, b, c admitted: 6 blocks used.
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(blocks_->num_free_blocks(), 0);
  out = Step();  // a needs a 3rd block: c (newest) is preempted.
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c);
  EXPECT_EQ(c->status(), SequenceStatus::kWaiting);
  EXPECT_EQ(c->num_computed_tokens(), 0);
  EXPECT_TRUE(c->block_table().empty());
  EXPECT_EQ(c->num_preemptions(), 1);
  EXPECT_EQ(out.scheduled.size(), 2u);  // a and b ran; nothing admitted in a preempting step.
  scheduler_->Finish(a, FinishReason::kStop);
  scheduler_->Finish(b, FinishReason::kStop);
  out = Step();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, c);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 8);  // Prompt + its generated token recomputed.
  EXPECT_EQ(scheduler_->num_preemptions(), 1u);
}

TEST_F(SchedulerTest, CachedPrefixIsSkippedAtAdmission) {
  Init(64, {.max_num_seqs = 8, .max_num_batched_tokens = 100});
  Sequence* a = Add(10);
  Step();
  scheduler_->Finish(a, FinishReason::kStop);
  Add(10);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.plan.entries.size(), 1u);
  EXPECT_EQ(out.plan.entries[0].start_pos, 8);
  EXPECT_EQ(out.plan.entries[0].token_ids, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(out.scheduled[0].seq->num_cached_tokens(), 8);
}

TEST(SchedulerOptionsTest, ValidateRejectsInconsistentOptions) {
  EXPECT_TRUE(SchedulerOptions{}.Validate().ok());
  EXPECT_FALSE(SchedulerOptions{.max_num_seqs = 0}.Validate().ok());
  EXPECT_FALSE(
      (SchedulerOptions{
           .max_num_batched_tokens = 100, .enable_chunked_prefill = false, .max_model_len = 200})
          .Validate()
          .ok());
}

}  // namespace
}  // namespace spark::engine::runtime
