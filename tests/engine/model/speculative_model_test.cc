// Speculative decoding over the real tiny fixtures (Qwen3, Qwen3-MoE, DeepSeek-V4, V4.1) on the
// CPU backend: greedy output with drafts (the engine's n-gram drafter, and an oracle that knows
// the answer but spoils part of each draft) is token for token the output without them, through
// argmax plans and logits plans, with chunked prefill, prefix-cache hits (a second round of the
// same prompts), a batch mixing drafted and undrafted sequences, and at TP=2 (two ranks in
// threads). A verify step gives each draft position the logits a plain step would, and a draft
// rejected at any position leaves the state of a run that never drafted: the logits of every
// later step are the plain run's (DeepSeek's compressor groups, shared entries, indexer keys
// and Engram history included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <tuple>
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

const char* const kFixtures[] = {"qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny",
                                  "deepseek-v41-tiny"};

// Rows of one position computed in different steps (a verify step of several tokens, or one
// token a step) may differ by summation order only.
constexpr float kRowTolerance = 1e-4f;

std::string CaseName(std::string fixture) {
  for (char& c : fixture) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return fixture;
}

// (fixture, argmax plans or logits plans)
class SpeculativeGreedyTest : public testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(SpeculativeGreedyTest, GreedyWithDraftsIsGreedyWithout) {
  const auto [fixture, argmax] = GetParam();
  auto rank = Load(fixture);
  ASSERT_NE(rank, nullptr);
  const RunResult plain = Generate(rank->runner.get(), Options(0, argmax), nullptr);
  ASSERT_EQ(plain.tokens.size(), 8u);
  EXPECT_GT(plain.stats.prefix_hits, 0u) << "the second round hits the prefix cache";
  for (const auto& t : plain.tokens) EXPECT_EQ(t.size(), 20u);

  auto ngram_rank = Load(fixture);
  const RunResult ngram = Generate(ngram_rank->runner.get(), Options(4, argmax), nullptr);
  EXPECT_EQ(ngram.tokens, plain.tokens);
  EXPECT_GT(ngram.stats.spec_drafts, 0u);

  auto oracle_rank = Load(fixture);
  OracleDrafter oracle(FullSequences(plain));
  const RunResult spec = Generate(oracle_rank->runner.get(), Options(4, argmax), &oracle);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
  EXPECT_GT(spec.stats.prefix_hits, 0u);
  EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps) << "accepted drafts save steps";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeGreedyTest,
                         testing::Combine(testing::ValuesIn(kFixtures), testing::Bool()),
                         [](const auto& info) {
                           return CaseName(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_ArgMaxPlans" : "_LogitsPlans");
                         });

// The verify step's logits rows: the row of each draft position equals what a plain forward of
// the same tokens gives for that position.
class SpeculativeStepTest : public testing::TestWithParam<const char*> {};

TEST_P(SpeculativeStepTest, DraftRowsAreThePlainRowsOfThosePositions) {
  auto a = Load(GetParam());
  auto b = Load(GetParam());
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
      ASSERT_NEAR((*rows)[i * vocab + v], (*row)[v], kRowTolerance) << "position " << 6 + i;
    }
  }
}

// A draft rejected at position j of k (j = k: all accepted) in a verify step, then the
// sequence cut back to its accepted tokens and decoded on: every later step's logits are those
// of a run that decoded the same tokens one step at a time, and so are the verify step's rows
// up to the first rejected draft. The prompt and k put draft tokens across the window's edge
// and V4.1's ratio-2 groups, so rejected drafts close compressor groups that the accepted
// tokens close again.
TEST_P(SpeculativeStepTest, RejectionAtAnyDraftPositionLeavesThePlainState) {
  constexpr int kDrafts = 6, kAfter = 8;
  const std::vector<int32_t> prompt = {24, 92, 49, 84, 113, 22, 106, 35, 90, 63, 27};
  const int n = static_cast<int>(prompt.size());
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  auto entry = [&](int32_t start, std::vector<int32_t> ids, int drafts) {
    runtime::StepPlan plan;
    runtime::StepPlanEntry e;
    e.token_ids = std::move(ids);
    e.start_pos = start;
    e.block_table = table;
    e.needs_logits = true;
    e.num_draft_tokens = drafts;
    plan.entries.push_back(e);
    return plan;
  };
  // The plain run: the prompt, then one greedy token a step; rows[i] is the row after the
  // token at position n + i.
  auto plain = Load(GetParam());
  ASSERT_NE(plain, nullptr);
  const size_t vocab = static_cast<size_t>(plain->runner->vocab_size());
  auto argmax = [&](const float* row) {
    return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
  };
  auto first = plain->runner->Run(entry(0, prompt, 0));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<int32_t> greedy = {argmax(first->data())};
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < kDrafts + kAfter; ++i) {
    auto row = plain->runner->Run(entry(n + i, {greedy[i]}, 0));
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    rows.push_back(*row);
    greedy.push_back(argmax(row->data()));
  }
  auto expect_row = [&](const float* got, int i, const std::string& what) {
    float worst = 0;
    for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::abs(got[v] - rows[i][v]));
    EXPECT_LE(worst, kRowTolerance) << what << ": position " << n + i;
  };
  for (int j = 0; j <= kDrafts; ++j) {
    SCOPED_TRACE("first rejected draft " + std::to_string(j));
    auto spec = Load(GetParam());
    ASSERT_NE(spec, nullptr);
    ASSERT_TRUE(spec->runner->Run(entry(0, prompt, 0)).ok());
    // The last real token, then drafts 0..j-1 right and the rest wrong.
    std::vector<int32_t> ids = {greedy[0]};
    for (int d = 0; d < kDrafts; ++d) {
      ids.push_back(d < j ? greedy[d + 1] : static_cast<int32_t>((greedy[d + 1] + 1 + d) % vocab));
    }
    auto verify = spec->runner->Run(entry(n, ids, kDrafts));
    ASSERT_TRUE(verify.ok()) << verify.status().ToString();
    ASSERT_EQ(verify->size(), (kDrafts + 1) * vocab);
    for (int i = 0; i <= j; ++i) expect_row(verify->data() + i * vocab, i, "verify row");
    // Accepted: the real token and j drafts; the target's token at the first rejection comes
    // next, as the engine would feed it.
    for (int i = j + 1; i < kDrafts + kAfter; ++i) {
      auto row = spec->runner->Run(entry(n + i, {greedy[i]}, 0));
      ASSERT_TRUE(row.ok()) << row.status().ToString();
      expect_row(row->data(), i, "after rollback");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeStepTest, testing::ValuesIn(kFixtures),
                         [](const auto& info) { return CaseName(info.param); });

// TP=2 (two ranks in threads, plans broadcast by rank 0): the oracle's drafts give the tokens
// of the TP=2 run without drafts.
TEST_P(SpeculativeStepTest, TwoRanksGiveTheTokensOfTwoRanksWithoutDrafts) {
  const std::string fixture = GetParam();
  auto run = [&](runtime::Drafter* drafter, int k) {
    auto group = comm::CreateLocalGroup(2, std::chrono::seconds(30));
    RunResult result;
    std::unique_ptr<OneRank> ranks[2];
    for (int r = 0; r < 2; ++r) {
      ranks[r] = Load(fixture, group[r].get(), ModelOptions{{r, 2}});
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

}  // namespace
}  // namespace spark::engine::model
