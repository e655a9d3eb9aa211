#include "engine/runtime/engine.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

constexpr int kVocab = 97;
constexpr int kBlockSize = 4;

struct Config {
  const char* name;
  bool prefix_caching;
  bool chunked;
  int budget;
  int num_blocks;
  int max_num_seqs;
};

std::vector<int32_t> Prompt(int len, int32_t salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 7 + salt) % kVocab);
  return p;
}

// Prompts with shared prefixes (a system prompt), different lengths, some repeated.
std::vector<std::vector<int32_t>> Workload() {
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> system = Prompt(13, 3);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = system;
    const std::vector<int32_t> tail = Prompt(1 + (i * 5) % 11, 11 + i % 3);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  prompts.push_back(Prompt(30, 1));
  prompts.push_back(Prompt(30, 1));
  return prompts;
}

EngineOptions Options(const Config& c) {
  EngineOptions o;
  o.scheduler.enable_chunked_prefill = c.chunked;
  o.scheduler.max_num_batched_tokens = c.budget;
  o.scheduler.max_num_seqs = c.max_num_seqs;
  o.scheduler.max_model_len = 64;
  o.blocks.num_blocks = c.num_blocks;
  o.blocks.block_size = kBlockSize;
  o.blocks.enable_prefix_caching = c.prefix_caching;
  return o;
}

// Runs the workload to completion; returns generated tokens by request id.
std::map<uint64_t, std::vector<int32_t>> RunAll(Engine& engine, int max_tokens) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = max_tokens;
  const auto prompts = Workload();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(engine.AddRequest(i, prompts[i], greedy).ok());
  }
  std::map<uint64_t, std::vector<int32_t>> out;
  for (int step = 0; engine.HasUnfinished() && step < 10000; ++step) {
    auto tokens = engine.Step();
    EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
    if (!tokens.ok()) break;
    for (const TokenOutput& t : *tokens) {
      if (t.has_token) out[t.seq_id].push_back(t.token);
    }
  }
  return out;
}

// One step; a failed step fails the test and yields nothing.
std::vector<TokenOutput> MustStep(Engine& engine) {
  auto out = engine.Step();
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<TokenOutput>{};
}

class EngineGreedyTest : public ::testing::TestWithParam<Config> {};

TEST_P(EngineGreedyTest, OutputsMatchReferenceAndEveryBlockIsFreed) {
  const Config& c = GetParam();
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto out = RunAll(**engine, 12);
  const auto prompts = Workload();
  ASSERT_EQ(out.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out.at(i), FakeModelRunner::ReferenceGreedy(prompts[i], 12, kVocab)) << "req " << i;
  }
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.kv_usage, 0.0f);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  if (c.prefix_caching) {
    EXPECT_GT(s.prefix_hits, 0u);
  } else {
    EXPECT_EQ(s.prefix_hits, 0u);
  }
  for (const StepPlan& plan : runner.plans()) {
    EXPECT_LE(plan.num_tokens(), c.budget);
    EXPECT_LE(int(plan.entries.size()), c.max_num_seqs);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, EngineGreedyTest,
                         ::testing::Values(Config{"plain", false, false, 64, 256, 16},
                                           Config{"prefix", true, false, 64, 256, 16},
                                           Config{"chunked", false, true, 8, 256, 16},
                                           Config{"chunked_prefix", true, true, 8, 256, 16},
                                           Config{"tiny_budget", true, true, 3, 256, 16},
                                           Config{"one_seq", true, true, 16, 256, 1},
                                           Config{"preempt", false, true, 16, 14, 16},
                                           Config{"preempt_prefix", true, true, 16, 14, 16},
                                           Config{"preempt_nochunk", true, false, 64, 14, 16}),
                         [](const auto& info) { return std::string(info.param.name); });

// With argmax plans, all-greedy steps ask the runner for ids only and give the same tokens;
// a step that samples one non-greedy sequence goes out as a plain plan again.
TEST(EngineTest, ArgMaxPlansForAllGreedyStepsOnly) {
  const Config c{"argmax", true, true, 16, 256, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  EngineOptions options = Options(c);
  options.argmax_plans = true;
  auto engine = Engine::Create(options, &runner);
  ASSERT_TRUE(engine.ok());
  const auto out = RunAll(**engine, 12);
  const auto prompts = Workload();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out.at(i), FakeModelRunner::ReferenceGreedy(prompts[i], 12, kVocab)) << "req " << i;
  }
  int argmax = 0;
  for (const StepPlan& plan : runner.plans()) {
    if (plan.num_logits_rows() > 0) {
      EXPECT_EQ(plan.command, StepCommand::kRunArgMax);
      ++argmax;
    }
  }
  EXPECT_GT(argmax, 0);

  FakeModelRunner mixed_runner(kVocab, c.num_blocks, kBlockSize);
  auto mixed = Engine::Create(options, &mixed_runner);
  ASSERT_TRUE(mixed.ok());
  SamplingParams greedy, sampled, logprobs;
  greedy.temperature = 0.0f;
  sampled.temperature = 0.7f;
  logprobs.temperature = 0.0f;
  logprobs.logprobs = true;
  ASSERT_TRUE((*mixed)->AddRequest(1, Prompt(5, 1), greedy).ok());
  ASSERT_TRUE((*mixed)->AddRequest(2, Prompt(5, 2), sampled).ok());
  MustStep(**mixed);
  EXPECT_EQ(mixed_runner.plans().back().command, StepCommand::kRun);
  FakeModelRunner lp_runner(kVocab, c.num_blocks, kBlockSize);
  auto with_logprobs = Engine::Create(options, &lp_runner);
  ASSERT_TRUE(with_logprobs.ok());
  ASSERT_TRUE((*with_logprobs)->AddRequest(3, Prompt(5, 3), logprobs).ok());
  MustStep(**with_logprobs);
  EXPECT_EQ(lp_runner.plans().back().command, StepCommand::kRun);
}

TEST(EngineTest, SmallCachePreemptsAndStillMatches) {
  const Config c{"preempt", true, true, 16, 14, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner);
  ASSERT_TRUE(engine.ok());
  RunAll(**engine, 12);
  EXPECT_GT((*engine)->stats().num_preemptions, 0u);
}

TEST(EngineTest, SharedPrefixIsNotRecomputed) {
  Config c{"prefix", true, true, 64, 256, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner).value();
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1;
  const std::vector<int32_t> prompt = Prompt(21, 5);
  ASSERT_TRUE(engine->AddRequest(1, prompt, p).ok());
  while (engine->HasUnfinished()) ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->AddRequest(2, prompt, p).ok());
  ASSERT_TRUE(engine->Step().ok());
  // 21 tokens = 5 full blocks + 1: all 5 full blocks (20 tokens) come from the cache.
  const StepPlan& last = runner.plans().back();
  ASSERT_EQ(last.entries.size(), 1u);
  EXPECT_EQ(last.entries[0].start_pos, 20);
  EXPECT_EQ(last.entries[0].token_ids.size(), 1u);
  EXPECT_EQ(engine->stats().prefix_hits, 20u);
  EXPECT_EQ(engine->stats().prefix_queries, 42u);
}

TEST(EngineTest, StopTokenEosAndMaxTokensFinish) {
  Config c{"plain", false, true, 64, 64, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  EngineOptions o = Options(c);
  const std::vector<int32_t> prompt = Prompt(5, 2);
  const auto ref = FakeModelRunner::ReferenceGreedy(prompt, 6, kVocab);
  o.eos_token_id = ref[3];
  auto engine = Engine::Create(o, &runner).value();
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 100;
  ASSERT_TRUE(engine->AddRequest(1, prompt, p).ok());  // Stops at EOS (4 tokens).
  p.ignore_eos = true;
  p.stop_token_ids = {ref[4]};
  ASSERT_TRUE(engine->AddRequest(2, prompt, p).ok());  // Stops at ref[4] (5 tokens).
  p.stop_token_ids.clear();
  p.max_tokens = 6;
  ASSERT_TRUE(engine->AddRequest(3, prompt, p).ok());  // Length.
  std::map<uint64_t, std::pair<int, FinishReason>> done;
  while (engine->HasUnfinished()) {
    for (const TokenOutput& t : MustStep(*engine)) {
      ++done[t.seq_id].first;
      if (t.finished) done[t.seq_id].second = t.finish_reason;
    }
  }
  EXPECT_EQ(done[1], std::make_pair(4, FinishReason::kStop));
  EXPECT_EQ(done[2], std::make_pair(5, FinishReason::kStop));
  EXPECT_EQ(done[3], std::make_pair(6, FinishReason::kLength));
  EXPECT_EQ(engine->stats().kv_usage, 0.0f);
}

TEST(EngineTest, FinishRequestFreesBlocksAndForgetsTheRequest) {
  Config c{"plain", true, true, 64, 64, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner).value();
  SamplingParams p;
  p.max_tokens = 50;
  ASSERT_TRUE(engine->AddRequest(7, Prompt(9, 1), p).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_GT(engine->stats().kv_usage, 0.0f);
  ASSERT_TRUE(engine->FinishRequest(7, FinishReason::kStop).ok());
  EXPECT_EQ(engine->stats().kv_usage, 0.0f);
  EXPECT_FALSE(engine->HasUnfinished());
  EXPECT_EQ(engine->Find(7), nullptr);
  EXPECT_EQ(engine->FinishRequest(7, FinishReason::kStop).code(), StatusCode::kNotFound);
}

TEST(EngineTest, SeededSamplingIsReproducible) {
  Config c{"plain", true, true, 64, 64, 16};
  std::vector<std::vector<int32_t>> runs;
  for (int run = 0; run < 3; ++run) {
    FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
    auto engine = Engine::Create(Options(c), &runner).value();
    SamplingParams p;
    p.temperature = 5.0f;  // Flat enough that the draw matters.
    p.max_tokens = 20;
    p.seed = run == 2 ? 43 : 42;
    ASSERT_TRUE(engine->AddRequest(run, Prompt(6, 1), p).ok());
    std::vector<int32_t> out;
    while (engine->HasUnfinished()) {
      for (const TokenOutput& t : MustStep(*engine)) out.push_back(t.token);
    }
    runs.push_back(out);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0], runs[2]);
}

TEST(EngineTest, AddRequestRejectsBadInput) {
  Config c{"plain", true, true, 64, 4, 16};
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner).value();
  SamplingParams p;
  EXPECT_EQ(engine->AddRequest(1, {}, p).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->AddRequest(1, {kVocab}, p).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->AddRequest(1, Prompt(64, 0), p).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->AddRequest(1, Prompt(20, 0), p).code(), StatusCode::kResourceExhausted);
  p.top_p = 0.0f;
  EXPECT_EQ(engine->AddRequest(1, {1}, p).code(), StatusCode::kInvalidArgument);
  p.top_p = 1.0f;
  ASSERT_TRUE(engine->AddRequest(1, {1}, p).ok());
  EXPECT_EQ(engine->AddRequest(1, {1}, p).code(), StatusCode::kAlreadyExists);
}

TEST(EngineTest, SequenceOutgrowingTheWholeCacheEndsWithLength) {
  Config c{"plain", false, true, 64, 3, 16};  // 12 token slots in all.
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  auto engine = Engine::Create(Options(c), &runner).value();
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 40;
  ASSERT_TRUE(engine->AddRequest(1, Prompt(5, 0), p).ok());
  int tokens = 0;
  FinishReason reason = FinishReason::kNone;
  for (int i = 0; i < 100 && engine->HasUnfinished(); ++i) {
    for (const TokenOutput& t : MustStep(*engine)) {
      tokens += t.has_token;
      if (t.finished) reason = t.finish_reason;
    }
  }
  EXPECT_FALSE(engine->HasUnfinished());
  EXPECT_EQ(reason, FinishReason::kLength);
  EXPECT_EQ(tokens, 12 - 5 + 1);  // The last token needs no KV slot of its own yet.
  EXPECT_EQ(engine->stats().kv_usage, 0.0f);
}

}  // namespace
}  // namespace spark::engine::runtime
