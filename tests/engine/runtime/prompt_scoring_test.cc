// Prompt scoring in the runtime (SamplingParams::prompt_logprobs) with the fake model, whose
// rows peak (10) at a hash of the history read back through the block table: the score of
// every prompt token is known in closed form. Covers chunked prefill, a prefix already in the
// cache (recomputed for its rows), max_tokens 0, requests that do not score (no extra rows), and
// the plan's wire flag.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/runtime/engine.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

constexpr int kVocab = 97, kBlocks = 64, kBlockSize = 4;

EngineOptions Options(int budget = 8) {
  EngineOptions o;
  o.scheduler.max_model_len = 128;
  o.scheduler.max_num_batched_tokens = budget;
  o.scheduler.max_scored_tokens = 5;
  o.blocks.num_blocks = kBlocks;
  o.blocks.block_size = kBlockSize;
  return o;
}

// A prompt of `n` tokens whose even positions follow the fake model's prediction (log-prob
// near 0) and odd ones do not (log-prob near -10).
std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p = {3};
  for (int i = 1; i < n; ++i) {
    const int32_t predicted = FakeModelRunner::NextToken(p, kVocab);
    p.push_back(i % 2 == 0 ? predicted : (predicted + 1) % kVocab);
  }
  return p;
}

// The fake model's log-probability of prompt[i] (i >= 1) given the tokens before it.
double Expected(const std::vector<int32_t>& prompt, size_t i) {
  const double lse = std::log(std::exp(10.0) + (kVocab - 1));
  const std::vector<int32_t> history(prompt.begin(), prompt.begin() + i);
  return (FakeModelRunner::NextToken(history, kVocab) == prompt[i] ? 10.0 : 0.0) - lse;
}

SamplingParams Scoring(int max_tokens, int top = 0) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.prompt_logprobs = top;
  p.max_tokens = max_tokens;
  return p;
}

// Runs until done; returns every output of request `id`.
std::vector<TokenOutput> Drain(Engine& engine, uint64_t id) {
  std::vector<TokenOutput> out;
  for (int step = 0; engine.HasUnfinished() && step < 1000; ++step) {
    auto outputs = engine.Step();
    EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
    if (!outputs.ok()) break;
    for (TokenOutput& o : *outputs) {
      if (o.seq_id == id) out.push_back(std::move(o));
    }
  }
  return out;
}

void ExpectScores(const std::vector<int32_t>& prompt, const std::vector<SampleResult>& scores) {
  ASSERT_EQ(scores.size(), prompt.size() - 1);
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(scores[i - 1].token, prompt[i]);
    EXPECT_NEAR(scores[i - 1].logprob, Expected(prompt, i), 1e-5) << "token " << i;
    EXPECT_EQ(scores[i - 1].rank, i % 2 == 0 ? 1 : 2) << "token " << i;
  }
}

TEST(PromptScoringTest, ScoresEveryPromptTokenAcrossChunks) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = Prompt(23);
  ASSERT_TRUE((*engine)->AddRequest(1, prompt, Scoring(2, 3)).ok());
  const std::vector<TokenOutput> out = Drain(**engine, 1);
  ASSERT_EQ(out.size(), 2u);
  ExpectScores(prompt, out[0].prompt_logprobs);
  EXPECT_EQ(out[0].prompt_logprobs[0].top_logprobs.size(), 3u);
  EXPECT_TRUE(out[1].prompt_logprobs.empty()) << "the scores come once, with the first token";
  EXPECT_EQ(out[0].token, FakeModelRunner::ReferenceGreedy(prompt, 1, kVocab)[0]);
  // Chunks of at most max_scored_tokens, each bringing a row per token.
  int scored_entries = 0;
  for (const StepPlan& plan : runner.plans()) {
    for (const StepPlanEntry& e : plan.entries) {
      if (!e.prompt_logits) continue;
      ++scored_entries;
      EXPECT_LE(e.token_ids.size(), 5u);
      EXPECT_EQ(e.logits_rows(), static_cast<int>(e.token_ids.size()));
      EXPECT_EQ(plan.command, StepCommand::kRun);
    }
  }
  EXPECT_EQ(scored_entries, 5);  // 23 tokens in chunks of 5
}

// Prompts scored side by side share max_scored_tokens a step (the rows the memory plan counts);
// a request queued behind them is served too.
TEST(PromptScoringTest, ScoredPromptsShareTheRowsOfAStep) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(64), &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> a = Prompt(13), b = Prompt(11);
  ASSERT_TRUE((*engine)->AddRequest(1, a, Scoring(1)).ok());
  ASSERT_TRUE((*engine)->AddRequest(2, b, Scoring(1)).ok());
  SamplingParams plain = Scoring(1);
  plain.prompt_logprobs = -1;
  ASSERT_TRUE((*engine)->AddRequest(3, Prompt(9), plain).ok());
  std::map<uint64_t, std::vector<SampleResult>> scores;
  for (int step = 0; (*engine)->HasUnfinished() && step < 100; ++step) {
    auto outputs = (*engine)->Step();
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    for (TokenOutput& o : *outputs) {
      if (!o.prompt_logprobs.empty()) scores[o.seq_id] = std::move(o.prompt_logprobs);
    }
  }
  ExpectScores(a, scores[1]);
  ExpectScores(b, scores[2]);
  bool both = false;
  for (const StepPlan& plan : runner.plans()) {
    int rows = 0, scored = 0;
    for (const StepPlanEntry& e : plan.entries) {
      if (e.prompt_logits) rows += e.logits_rows(), ++scored;
    }
    EXPECT_LE(rows, 5) << "step " << plan.step;
    both |= scored == 2;
  }
  EXPECT_TRUE(both) << "the second prompt takes what the first leaves of a step";
  EXPECT_FALSE((*engine)->HasUnfinished());
}

TEST(PromptScoringTest, MaxTokensZeroScoresWithoutGenerating) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = Prompt(9);
  ASSERT_TRUE((*engine)->AddRequest(1, prompt, Scoring(0)).ok());
  const std::vector<TokenOutput> out = Drain(**engine, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].has_token);
  EXPECT_TRUE(out[0].finished);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kLength);
  ExpectScores(prompt, out[0].prompt_logprobs);
  EXPECT_FALSE((*engine)->HasUnfinished());
}

TEST(PromptScoringTest, OneTokenPromptWithMaxTokensZeroEndsAtOnce) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->AddRequest(1, {7}, Scoring(0)).ok());
  const std::vector<TokenOutput> out = Drain(**engine, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].has_token);
  EXPECT_TRUE(out[0].finished);
  EXPECT_TRUE(out[0].prompt_logprobs.empty());
}

TEST(PromptScoringTest, CachedPrefixIsRecomputedForItsScores) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(64), &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = Prompt(17);
  SamplingParams plain = Scoring(1);
  plain.prompt_logprobs = -1;
  ASSERT_TRUE((*engine)->AddRequest(1, prompt, plain).ok());
  Drain(**engine, 1);
  // The same prompt again, unscored: its full blocks come from the cache.
  ASSERT_TRUE((*engine)->AddRequest(2, prompt, plain).ok());
  Drain(**engine, 2);
  const uint64_t hits = (*engine)->stats().prefix_hits;
  EXPECT_GT(hits, 0u);
  ASSERT_TRUE((*engine)->AddRequest(3, prompt, Scoring(1)).ok());
  const std::vector<TokenOutput> out = Drain(**engine, 3);
  ASSERT_FALSE(out.empty());
  ExpectScores(prompt, out[0].prompt_logprobs);
  EXPECT_EQ((*engine)->stats().prefix_hits, hits) << "a scored prompt takes no cached prefix";
}

TEST(PromptScoringTest, RequestsThatDoNotScoreGetOneRowEach) {
  FakeModelRunner runner(kVocab, kBlocks, kBlockSize);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 3;
  p.logprobs = true;
  ASSERT_TRUE((*engine)->AddRequest(1, Prompt(19), p).ok());
  ASSERT_TRUE((*engine)->AddRequest(2, Prompt(6), Scoring(3)).ok());
  Drain(**engine, 1);
  for (const StepPlan& plan : runner.plans()) {
    for (const StepPlanEntry& e : plan.entries) {
      if (e.seq_id == 1) {
        EXPECT_FALSE(e.prompt_logits);
        if (e.needs_logits) {
          EXPECT_EQ(e.logits_rows(), 1);
        }
      }
    }
  }
}

TEST(PromptScoringTest, MaxTokensZeroNeedsPromptScoring) {
  SamplingParams p = Scoring(0);
  EXPECT_TRUE(p.Validate().ok());
  p.prompt_logprobs = -1;
  EXPECT_EQ(p.Validate().code(), StatusCode::kInvalidArgument);
  p.prompt_logprobs = 21;
  EXPECT_EQ(p.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(PromptScoringTest, PlanFlagRoundTripsAndRefusesDrafts) {
  StepPlan plan;
  StepPlanEntry e;
  e.seq_id = 4;
  e.token_ids = {1, 2, 3};
  e.block_table = {0};
  e.needs_logits = true;
  e.prompt_logits = true;
  plan.entries.push_back(e);
  EXPECT_EQ(plan.num_logits_rows(), 3);
  auto back = StepPlan::Deserialize(plan.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, plan);
  plan.entries[0].num_draft_tokens = 1;  // prompt rows and drafts never travel together
  auto bad = StepPlan::Deserialize(plan.Serialize());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  plan.entries[0].num_draft_tokens = 0;
  plan.entries[0].needs_logits = false;
  EXPECT_EQ(StepPlan::Deserialize(plan.Serialize()).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace spark::engine::runtime
