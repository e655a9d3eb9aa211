// ModelDrafter (engine/runtime/model_drafter.h): a step's sequences draft in one draft plan, one
// entry per sequence with room (its last token as the anchor at its last position, its block
// table, the whole block asked), each draft cut to its room; a runner's error is kept and names
// the sequences, and a runner answering the wrong number of blocks is an error, not a guess.
#include <gtest/gtest.h>

#include "engine/runtime/model_drafter.h"

namespace spark::engine::runtime {
namespace {

constexpr int kVocab = 50;

// Answers each entry with anchor + 1, anchor + 2, ... (mod kVocab) and records the plans.
class PlanRecordingRunner : public ModelRunner {
 public:
  int vocab_size() const override { return kVocab; }
  bool has_draft_model() const override { return true; }
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const StepPlan& plan) override {
    plans.push_back(plan);
    if (!fail.ok()) return fail;
    std::vector<std::vector<int32_t>> out;
    for (const StepPlanEntry& e : plan.entries) {
      std::vector<int32_t>& d = out.emplace_back();
      for (int i = 1; i <= e.num_draft_tokens; ++i) d.push_back((e.token_ids[0] + i) % kVocab);
    }
    if (drop_one) out.pop_back();
    return out;
  }
  Result<std::vector<float>> Run(const StepPlan&) override { return std::vector<float>(); }

  std::vector<StepPlan> plans;
  Status fail;
  bool drop_one = false;
};

Sequence Decoding(uint64_t id, std::vector<int32_t> tokens, std::vector<int32_t> table) {
  Sequence seq(id, std::move(tokens), SamplingParams(), 0);
  seq.block_table() = std::move(table);
  return seq;
}

TEST(ModelDrafterTest, OneDraftPlanForAStepsSequences) {
  PlanRecordingRunner runner;
  ModelDrafter drafter(&runner, 5);
  const Sequence a = Decoding(7, {1, 2, 3}, {4, 9});
  const Sequence b = Decoding(8, {5, 6}, {1});
  const Sequence c = Decoding(9, {10, 11, 12, 13}, {2, 3});
  const std::vector<DraftRequest> requests = {{&a, 3}, {&b, 0}, {&c, 7}};
  const std::vector<std::vector<int32_t>> drafts = drafter.ProposeForAll(requests);
  ASSERT_EQ(runner.plans.size(), 1u) << "one draft forward for the step";
  const StepPlan& plan = runner.plans[0];
  EXPECT_EQ(plan.command, StepCommand::kDraft);
  ASSERT_EQ(plan.entries.size(), 2u) << "a sequence without room is not drafted";
  EXPECT_EQ(plan.entries[0].seq_id, 7u);
  EXPECT_EQ(plan.entries[0].token_ids, std::vector<int32_t>{3});
  EXPECT_EQ(plan.entries[0].start_pos, 2);
  EXPECT_EQ(plan.entries[0].block_table, (std::vector<int32_t>{4, 9}));
  EXPECT_EQ(plan.entries[0].num_draft_tokens, 5) << "the whole block, whatever the room";
  EXPECT_EQ(plan.entries[1].seq_id, 9u);
  EXPECT_EQ(plan.entries[1].token_ids, std::vector<int32_t>{13});
  EXPECT_EQ(plan.entries[1].start_pos, 3);
  ASSERT_EQ(drafts.size(), 3u);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{4, 5, 6})) << "cut to its room";
  EXPECT_TRUE(drafts[1].empty());
  EXPECT_EQ(drafts[2], (std::vector<int32_t>{14, 15, 16, 17, 18}));
  EXPECT_TRUE(drafter.status().ok());
  // ProposeFor is the same plan with one entry.
  EXPECT_EQ(drafter.ProposeFor(c, 2), (std::vector<int32_t>{14, 15}));
  ASSERT_EQ(runner.plans.size(), 2u);
  EXPECT_EQ(runner.plans[1].entries.size(), 1u);
}

TEST(ModelDrafterTest, NothingToDraftSendsNoPlan) {
  PlanRecordingRunner runner;
  ModelDrafter drafter(&runner, 4);
  const Sequence prompt_only = Decoding(1, {3}, {0});  // no token before the anchor
  const Sequence no_room = Decoding(2, {3, 4}, {0});
  const std::vector<DraftRequest> requests = {{&prompt_only, 4}, {&no_room, 0}};
  const auto drafts = drafter.ProposeForAll(requests);
  EXPECT_TRUE(runner.plans.empty());
  EXPECT_EQ(drafts, (std::vector<std::vector<int32_t>>{{}, {}}));
}

TEST(ModelDrafterTest, ARunnersErrorIsKeptAndNamesTheSequences) {
  PlanRecordingRunner runner;
  runner.fail = InvalidArgumentError("block table too short");
  ModelDrafter drafter(&runner, 4);
  const Sequence a = Decoding(11, {1, 2}, {0});
  const Sequence b = Decoding(12, {3, 4}, {1});
  const std::vector<DraftRequest> requests = {{&a, 4}, {&b, 4}};
  EXPECT_EQ(drafter.ProposeForAll(requests), (std::vector<std::vector<int32_t>>{{}, {}}));
  EXPECT_EQ(drafter.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(drafter.status().message().find("sequences 11, 12"), std::string::npos)
      << drafter.status().message();
  // After an error it drafts no more (the engine fails the step).
  runner.fail = Status::Ok();
  EXPECT_TRUE(drafter.ProposeFor(a, 4).empty());
  EXPECT_EQ(runner.plans.size(), 1u);
}

TEST(ModelDrafterTest, AnAnswerForTooFewBlocksIsAnError) {
  PlanRecordingRunner runner;
  runner.drop_one = true;
  ModelDrafter drafter(&runner, 4);
  const Sequence a = Decoding(1, {1, 2}, {0});
  const Sequence b = Decoding(2, {3, 4}, {1});
  const std::vector<DraftRequest> requests = {{&a, 4}, {&b, 4}};
  EXPECT_EQ(drafter.ProposeForAll(requests), (std::vector<std::vector<int32_t>>{{}, {}}));
  EXPECT_EQ(drafter.status().code(), StatusCode::kInternal) << drafter.status().ToString();
}

}  // namespace
}  // namespace spark::engine::runtime
