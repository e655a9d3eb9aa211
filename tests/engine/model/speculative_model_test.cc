// Speculative decoding over the real Qwen3 tiny fixture on the CPU backend: greedy output with
// drafts (the engine's n-gram drafter, and an oracle that knows the answer but spoils part of
// each draft) is token for token the output without them, through argmax plans and logits
// plans, with chunked prefill, prefix-cache hits (a second round of the same prompts), a batch
// mixing drafted and undrafted sequences, and at TP=2 (two ranks in threads). A verify step
// gives each draft position the logits a plain step would; a family with state beyond the
// paged cache refuses drafts.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/plan_broadcast.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model {
namespace {

using namespace speculative_testing;

using fixture_testing::Load;
using fixture_testing::OneRank;

class SpeculativeQwen3Test : public testing::TestWithParam<bool> {};  // argmax plans or logits

TEST_P(SpeculativeQwen3Test, GreedyWithDraftsIsGreedyWithout) {
  const bool argmax = GetParam();
  auto rank = Load("qwen3-tiny");
  ASSERT_NE(rank, nullptr);
  const RunResult plain = Generate(rank->runner.get(), Options(0, argmax), nullptr);
  ASSERT_EQ(plain.tokens.size(), 8u);
  EXPECT_GT(plain.stats.prefix_hits, 0u) << "the second round hits the prefix cache";
  for (const auto& t : plain.tokens) EXPECT_EQ(t.size(), 20u);

  auto ngram_rank = Load("qwen3-tiny");
  const RunResult ngram = Generate(ngram_rank->runner.get(), Options(4, argmax), nullptr);
  EXPECT_EQ(ngram.tokens, plain.tokens);
  EXPECT_GT(ngram.stats.spec_drafts, 0u);

  auto oracle_rank = Load("qwen3-tiny");
  OracleDrafter oracle(FullSequences(plain));
  const RunResult spec = Generate(oracle_rank->runner.get(), Options(4, argmax), &oracle);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
  EXPECT_GT(spec.stats.prefix_hits, 0u);
  EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps) << "accepted drafts save steps";
}

INSTANTIATE_TEST_SUITE_P(Plans, SpeculativeQwen3Test, testing::Values(true, false),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "ArgMaxPlans" : "LogitsPlans";
                         });

// The verify step's logits rows: the row of each draft position equals what a plain forward of
// the same tokens gives for that position.
TEST(SpeculativeQwen3StepTest, DraftRowsAreThePlainRowsOfThosePositions) {
  auto a = Load("qwen3-tiny");
  auto b = Load("qwen3-tiny");
  ASSERT_TRUE(a && b);
  runtime::StepPlan plan;
  runtime::StepPlanEntry e;
  e.token_ids = {5, 17, 42, 7, 9, 11};
  e.block_table = {0, 1, 2};
  e.needs_logits = true;
  plan.entries.push_back(e);
  ASSERT_TRUE(a->runner->Run(plan).ok());
  ASSERT_TRUE(b->runner->Run(plan).ok());
  // a: one verify step of 3 tokens (the last real one and 2 drafts); b: 3 plain steps.
  runtime::StepPlan verify = plan;
  verify.entries[0].start_pos = 6;
  verify.entries[0].token_ids = {30, 2, 8};
  verify.entries[0].num_draft_tokens = 2;
  // Beside it, another sequence's prompt: not every token of the step is a logits row.
  runtime::StepPlanEntry other;
  other.seq_id = 1;
  other.token_ids = {3, 1, 4, 1, 5, 9, 2};
  other.block_table = {4, 5};
  other.needs_logits = true;
  verify.entries.push_back(other);
  auto rows = a->runner->Run(verify);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  const size_t vocab = static_cast<size_t>(a->runner->vocab_size());
  ASSERT_EQ(rows->size(), 4 * vocab);
  for (int i = 0; i < 3; ++i) {
    runtime::StepPlan one = plan;
    one.entries[0].start_pos = 6 + i;
    one.entries[0].token_ids = {verify.entries[0].token_ids[i]};
    auto row = b->runner->Run(one);
    ASSERT_TRUE(row.ok());
    for (size_t v = 0; v < vocab; ++v) {
      ASSERT_NEAR((*rows)[i * vocab + v], (*row)[v], 1e-4f) << "position " << 6 + i;
    }
  }
}

// TP=2 (two ranks in threads, plans broadcast by rank 0): the oracle's drafts give the tokens
// of the TP=2 run without drafts.
TEST(SpeculativeQwen3TpTest, TwoRanksGiveTheTokensOfTwoRanksWithoutDrafts) {
  auto run = [](runtime::Drafter* drafter, int k) {
    auto group = comm::CreateLocalGroup(2, std::chrono::seconds(30));
    RunResult result;
    std::unique_ptr<OneRank> ranks[2];
    for (int r = 0; r < 2; ++r) {
      ranks[r] = Load("qwen3-tiny", group[r].get(), ModelOptions{{r, 2}});
      if (ranks[r] == nullptr) return result;
    }
    Status worker;
    std::thread t([&] { worker = runtime::RunWorkerLoop(*group[1], *ranks[1]->runner); });
    runtime::BroadcastingModelRunner rank0(group[0].get(), ranks[0]->runner.get());
    result = Generate(&rank0, Options(k, true), drafter);
    EXPECT_TRUE(rank0.Shutdown().ok());
    t.join();
    EXPECT_TRUE(worker.ok()) << worker.ToString();
    return result;
  };
  const RunResult plain = run(nullptr, 0);
  ASSERT_EQ(plain.tokens.size(), 8u);
  OracleDrafter oracle(FullSequences(plain));
  const RunResult spec = run(&oracle, 3);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
}

// DeepSeek-V4 keeps compressor state beyond the paged cache: an engine with drafts is refused
// at start, naming the model type.
TEST(SpeculativeQwen3StepTest, DeepseekV4RefusesDraftsAtStart) {
  auto rank = Load("deepseek-v4-tiny");
  ASSERT_NE(rank, nullptr);
  auto engine = runtime::Engine::Create(Options(3, true), rank->runner.get());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(engine.status().message().find("deepseek_v4"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace spark::engine::model
