// Speculative decoding in the runtime: the n-gram drafter, the options' refusals, greedy output
// token for token equal to a run without drafts (drafts partly right, always wrong, from the
// n-gram drafter; with chunked prefill, prefix caching, preemption, a grammar and TP ranks),
// the KV bookkeeping after rejected drafts equal to a run that never drafted, and the
// rejection sampler's output distribution equal to the target's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "engine/runtime/drafter.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/ngram_drafter.h"
#include "engine/runtime/plan_broadcast.h"
#include "engine/runtime/sampler.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

constexpr int kVocab = 97;
constexpr int kBlockSize = 4;

// Knows the fake model: proposes its real continuation, then (when `wrong_at` < k) a wrong
// token at that draft position. wrong_at cycles 0..k so every acceptance length occurs.
class ScriptedDrafter : public Drafter {
 public:
  explicit ScriptedDrafter(bool always_wrong) : always_wrong_(always_wrong) {}
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) override {
    std::vector<int32_t> out = FakeModelRunner::ReferenceGreedy(
        std::vector<int32_t>(tokens.begin(), tokens.end()), max_tokens, kVocab);
    const int wrong_at = always_wrong_ ? 0 : calls_++ % (max_tokens + 1);
    if (wrong_at < max_tokens) out[wrong_at] = (out[wrong_at] + 1) % kVocab;
    ++proposed_;
    return out;
  }
  int proposed() const { return proposed_; }

 private:
  const bool always_wrong_;
  int calls_ = 0;
  int proposed_ = 0;
};

// A model drafter as the scheduler meets one (ModelDrafter): before it proposes, the sequence
// must hold the blocks of `block` positions from its last token on, where the drafter writes
// its block's state; counts proposals that found them missing.
class BlockDrafter : public ScriptedDrafter {
 public:
  BlockDrafter(int block, bool always_wrong) : ScriptedDrafter(always_wrong), block_(block) {}
  int block_tokens() const override { return block_; }
  std::vector<int32_t> ProposeFor(const Sequence& seq, int max_tokens) override {
    const int64_t covered = static_cast<int64_t>(seq.block_table().size()) * kBlockSize;
    if (covered < seq.num_tokens() - 1 + block_) ++uncovered_;
    return Propose(seq.token_ids(), std::min(max_tokens, block_));
  }
  // Counts the calls and the most sequences one call drafted for.
  std::vector<std::vector<int32_t>> ProposeForAll(std::span<const DraftRequest> requests) override {
    ++batches_;
    largest_batch_ = std::max(largest_batch_, requests.size());
    return Drafter::ProposeForAll(requests);
  }
  int uncovered() const { return uncovered_; }
  int batches() const { return batches_; }
  size_t largest_batch() const { return largest_batch_; }

 private:
  const int block_;
  int uncovered_ = 0;
  int batches_ = 0;
  size_t largest_batch_ = 0;
};

EngineOptions Options(bool prefix_caching, bool chunked, int budget, int num_blocks, int k) {
  EngineOptions o;
  o.scheduler.enable_chunked_prefill = chunked;
  o.scheduler.max_num_batched_tokens = budget;
  o.scheduler.max_num_seqs = 8;
  o.scheduler.max_model_len = 64;
  o.blocks.num_blocks = num_blocks;
  o.blocks.block_size = kBlockSize;
  o.blocks.enable_prefix_caching = prefix_caching;
  if (k > 0) {
    o.speculative.method = "ngram";
    o.speculative.num_speculative_tokens = k;
  }
  return o;
}

std::vector<int32_t> Prompt(int len, int32_t salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 7 + salt) % kVocab);
  return p;
}

// Shared prefixes (prefix cache hits), repeated text (the n-gram drafter finds matches), a
// prompt long enough to be chunked, and one short prompt whose sequence often has no draft.
std::vector<std::vector<int32_t>> Workload() {
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> system = Prompt(13, 3);
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p = system;
    const std::vector<int32_t> tail = Prompt(1 + (i * 5) % 11, 11 + i % 3);
    p.insert(p.end(), tail.begin(), tail.end());
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  prompts.push_back(Prompt(30, 1));
  prompts.push_back(Prompt(30, 1));
  prompts.push_back({42});
  return prompts;
}

struct Outcome {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  EngineStats stats;
};

// Runs the workload greedily; `drafter` replaces the engine's own (null: keep it).
Outcome RunAll(const EngineOptions& options, ModelRunner* runner, Drafter* drafter,
           int max_tokens = 20) {
  Outcome run;
  auto engine = Engine::Create(options, runner);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return run;
  if (drafter != nullptr) (*engine)->SetDrafter(drafter);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = max_tokens;
  const auto prompts = Workload();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE((*engine)->AddRequest(i, prompts[i], greedy).ok());
  }
  for (int step = 0; (*engine)->HasUnfinished() && step < 10000; ++step) {
    auto out = (*engine)->Step();
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) break;
    for (const TokenOutput& t : *out) {
      if (t.has_token) run.tokens[t.seq_id].push_back(t.token);
    }
  }
  run.stats = (*engine)->stats();
  return run;
}

void ExpectReference(const Outcome& run, int max_tokens) {
  const auto prompts = Workload();
  ASSERT_EQ(run.tokens.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(run.tokens.at(i), FakeModelRunner::ReferenceGreedy(prompts[i], max_tokens, kVocab))
        << "request " << i;
  }
}

TEST(NgramDrafterTest, ProposesWhatFollowedTheLongestMatch) {
  NgramDrafter d(1, 3);
  // Suffix "7 8 9" occurs at 1..3 and was followed by 4 5 6 1.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{0, 7, 8, 9, 4, 5, 6, 1, 7, 8, 9}, 3),
            (std::vector<int32_t>{4, 5, 6}));
  // Only the 1-gram "9" matches (at 2, then at 5): the most recent one wins.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{3, 1, 9, 2, 4, 9, 6, 5, 9}, 2),
            (std::vector<int32_t>{6, 5}));
  // The draft stops at the end of the sequence.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{1, 2, 3, 1, 2}, 5), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_TRUE(d.Propose(std::vector<int32_t>{1, 2, 3, 4}, 4).empty()) << "no match";
  NgramDrafter two(2, 2);
  EXPECT_TRUE(two.Propose(std::vector<int32_t>{5, 1, 6, 1}, 4).empty()) << "1-gram not tried";
  EXPECT_TRUE(d.Propose(std::vector<int32_t>{1, 2, 1}, 0).empty());
  // In a loop the most recent match is followed by one token: an earlier one gives all three.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{7, 7, 7, 7, 7, 7}, 3), (std::vector<int32_t>{7, 7, 7}));
  // The most recent match followed by enough tokens wins over an earlier one.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{4, 1, 2, 4, 3, 3, 4}, 2),
            (std::vector<int32_t>{3, 3}));
}

TEST(SpeculativeOptionsTest, MtpIsRefusedByNameAndDsparkNeedsADraftModel) {
  SpeculativeOptions o;
  o.method = "mtp";
  o.num_speculative_tokens = 3;
  Status s = o.Validate();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("'mtp' is not implemented"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("use method dspark"), std::string::npos) << s.message();
  FakeModelRunner runner(kVocab, 16, kBlockSize);
  EngineOptions eo = Options(true, true, 32, 16, 0);
  eo.speculative = o;
  EXPECT_EQ(Engine::Create(eo, &runner).status().code(), StatusCode::kUnimplemented);
  // dspark is a valid method; a runner without a draft model cannot run it.
  eo.speculative.method = "dspark";
  EXPECT_TRUE(eo.speculative.Validate().ok());
  EXPECT_TRUE(eo.speculative.needs_draft_model());
  s = Engine::Create(eo, &runner).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("needs the checkpoint's DSpark draft stack"), std::string::npos)
      << s.message();
  eo.speculative.num_speculative_tokens = 17;
  EXPECT_EQ(eo.speculative.Validate().message(),
            "num_speculative_tokens 17 out of range: dspark needs 1..16 draft tokens a step");
  // ngram's lookup sizes are refused by name rather than ignored.
  eo.speculative.num_speculative_tokens = 4;
  eo.speculative.prompt_lookup_max = 3;
  EXPECT_EQ(eo.speculative.Validate().message(),
            "prompt_lookup_max applies to speculative method ngram only (method is dspark)");
}

TEST(SpeculativeOptionsTest, NgramFieldsAreCheckedPrecisely) {
  auto check = [](int k, int lo, int hi) {
    SpeculativeOptions o;
    o.method = "ngram";
    o.num_speculative_tokens = k;
    o.prompt_lookup_min = lo;
    o.prompt_lookup_max = hi;
    return o.Validate();
  };
  EXPECT_TRUE(check(4, 1, 4).ok());
  EXPECT_EQ(check(0, 1, 4).message(),
            "num_speculative_tokens 0 out of range: ngram needs 1..16 draft tokens a step");
  EXPECT_EQ(check(17, 1, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(check(4, 0, 4).message(), "prompt_lookup_min 0 must be >= 1 (tokens matched)");
  EXPECT_EQ(check(4, 3, 2).message(), "prompt_lookup_max 2 must be in prompt_lookup_min (3) .. 64");
  SpeculativeOptions typo;
  typo.method = "ngarm";
  EXPECT_EQ(typo.Validate().code(), StatusCode::kInvalidArgument);
}

// A runner that cannot verify drafts is refused at Create, with its reason.
class NoDraftRunner : public FakeModelRunner {
 public:
  NoDraftRunner() : FakeModelRunner(kVocab, 16, kBlockSize) {}
  std::string WhyNoSpeculation() const override { return "its state has no rollback"; }
};

TEST(SpeculativeEngineTest, RunnerWithoutRollbackIsRefusedAtCreate) {
  NoDraftRunner runner;
  auto engine = Engine::Create(Options(true, true, 32, 16, 3), &runner);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(engine.status().message().find("its state has no rollback"), std::string::npos);
}

struct GreedyCase {
  const char* name;
  bool prefix_caching;
  bool chunked;
  int budget;
  int num_blocks;
  int k;
};

class SpeculativeGreedyTest : public testing::TestWithParam<GreedyCase> {};

// Partly right drafts: every acceptance length from 0 to k occurs; the output is the model's
// greedy output, and drafts were both accepted and rejected.
TEST_P(SpeculativeGreedyTest, ScriptedDraftsGiveTheGreedyTokens) {
  const GreedyCase& c = GetParam();
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  ScriptedDrafter drafter(false);
  const Outcome run =
      RunAll(Options(c.prefix_caching, c.chunked, c.budget, c.num_blocks, c.k), &runner, &drafter);
  ExpectReference(run, 20);
  EXPECT_GT(run.stats.spec_drafts, 0u);
  EXPECT_GT(run.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(run.stats.spec_accepted_tokens, run.stats.spec_draft_tokens);
  // Per draft position: k entries summing to the accepted tokens, none above the one before (a
  // draft token is kept only after every one before it); with every acceptance length from 0
  // to k occurring, the last position too.
  const std::vector<uint64_t>& per_pos = run.stats.spec_accepted_per_pos;
  ASSERT_EQ(per_pos.size(), static_cast<size_t>(c.k));
  uint64_t sum = 0;
  for (size_t i = 0; i < per_pos.size(); ++i) {
    sum += per_pos[i];
    if (i > 0) {
      EXPECT_LE(per_pos[i], per_pos[i - 1]) << "position " << i;
    }
  }
  EXPECT_EQ(sum, run.stats.spec_accepted_tokens);
  EXPECT_GT(per_pos.back(), 0u);
  // Sequences with and without drafts ran in one step.
  bool mixed = false;
  for (const StepPlan& plan : runner.plans()) {
    int drafted = 0;
    for (const StepPlanEntry& e : plan.entries) drafted += e.num_draft_tokens > 0 ? 1 : 0;
    mixed |= drafted > 0 && drafted < static_cast<int>(plan.entries.size());
  }
  EXPECT_TRUE(mixed);
}

// A model drafter's blocks: held for its whole block before it proposes (a block longer than
// the step's room, so some are given back at once), every drafting sequence of a step in one
// call, and the output is still the greedy one.
TEST_P(SpeculativeGreedyTest, ModelDrafterGetsItsBlocksAndGivesTheGreedyTokens) {
  const GreedyCase& c = GetParam();
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  BlockDrafter drafter(c.k + 2, false);
  const Outcome run =
      RunAll(Options(c.prefix_caching, c.chunked, c.budget, c.num_blocks, c.k), &runner, &drafter);
  ExpectReference(run, 20);
  EXPECT_GT(drafter.proposed(), 0);
  EXPECT_EQ(drafter.uncovered(), 0);
  EXPECT_GT(run.stats.spec_accepted_tokens, 0u);
  // A step's sequences draft together: one call a step at most, and with budget for two
  // drafting sequences some call took several.
  EXPECT_LE(drafter.batches(), static_cast<int>(runner.plans().size()));
  if (c.budget >= 2 * (1 + c.k)) {
    EXPECT_GT(drafter.largest_batch(), 1u);
  }
  // Blocks held for the block past the kept draft went back before the step ran: every entry's
  // table covers exactly its positions.
  for (const StepPlan& plan : runner.plans()) {
    for (const StepPlanEntry& e : plan.entries) {
      const size_t end = e.start_pos + e.token_ids.size();
      EXPECT_EQ(e.block_table.size(), (end + kBlockSize - 1) / kBlockSize)
          << "sequence " << e.seq_id << " at " << e.start_pos;
    }
  }
}

// The engine's own n-gram drafter on the repetitive workload.
TEST_P(SpeculativeGreedyTest, NgramDraftsGiveTheGreedyTokens) {
  const GreedyCase& c = GetParam();
  FakeModelRunner runner(kVocab, c.num_blocks, kBlockSize);
  const Outcome run = RunAll(Options(c.prefix_caching, c.chunked, c.budget, c.num_blocks, c.k),
                         &runner, nullptr);
  ExpectReference(run, 20);
  EXPECT_GT(run.stats.spec_drafts, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SpeculativeGreedyTest,
    testing::Values(GreedyCase{"PrefixCacheChunked", true, true, 16, 64, 4},
                    GreedyCase{"NoPrefixCache", false, true, 16, 64, 3},
                    GreedyCase{"WholePrompts", true, false, 64, 64, 5},
                    GreedyCase{"TightBudget", true, true, 5, 64, 4},
                    GreedyCase{"FewBlocksPreempts", true, true, 16, 20, 4},
                    GreedyCase{"OneDraftToken", true, true, 16, 64, 1}),
    [](const testing::TestParamInfo<GreedyCase>& info) { return info.param.name; });

// Drafts that are always wrong: step by step, every sequence's tokens, computed count, block
// table size, the free and cached block counts and the KV read back are those of an engine
// that never drafted: rollback leaves nothing behind.
void ExpectNoTraceOfRejectedDrafts(ScriptedDrafter& wrong) {
  // Budget and blocks to spare, so drafts change no other sequence's chunk or admission.
  constexpr int kBlocks = 160, kBudget = 256;
  FakeModelRunner plain_runner(kVocab, kBlocks, kBlockSize);
  FakeModelRunner spec_runner(kVocab, kBlocks, kBlockSize);
  auto plain = Engine::Create(Options(true, true, kBudget, kBlocks, 0), &plain_runner).value();
  auto spec = Engine::Create(Options(true, true, kBudget, kBlocks, 4), &spec_runner).value();
  spec->SetDrafter(&wrong);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 12;
  const auto prompts = Workload();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(plain->AddRequest(i, prompts[i], greedy).ok());
    ASSERT_TRUE(spec->AddRequest(i, prompts[i], greedy).ok());
  }
  int steps = 0;
  while (plain->HasUnfinished()) {
    auto a = plain->Step();
    auto b = spec->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size()) << "step " << steps;
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].token, (*b)[i].token);
      EXPECT_EQ((*a)[i].finished, (*b)[i].finished);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Sequence* x = plain->Find(i);
      const Sequence* y = spec->Find(i);
      ASSERT_EQ(x == nullptr, y == nullptr);
      if (x == nullptr) continue;
      EXPECT_EQ(x->token_ids(), y->token_ids());
      EXPECT_EQ(x->num_computed_tokens(), y->num_computed_tokens()) << "seq " << i;
      EXPECT_EQ(x->block_table().size(), y->block_table().size()) << "seq " << i;
      // What attention would read: the KV of every computed position.
      for (int pos = 0; pos < x->num_computed_tokens(); ++pos) {
        const size_t block = pos / kBlockSize, offset = pos % kBlockSize;
        const size_t sx = size_t(x->block_table()[block]) * kBlockSize + offset;
        const size_t sy = size_t(y->block_table()[block]) * kBlockSize + offset;
        EXPECT_EQ(plain_runner.cache()[sx], spec_runner.cache()[sy]);
      }
    }
    const EngineStats sa = plain->stats(), sb = spec->stats();
    EXPECT_EQ(sa.kv_usage, sb.kv_usage) << "step " << steps;
    EXPECT_EQ(sa.prefix_hits, sb.prefix_hits);
    ++steps;
  }
  EXPECT_FALSE(spec->HasUnfinished());
  EXPECT_GT(wrong.proposed(), 10);
  EXPECT_EQ(spec->stats().spec_accepted_tokens, 0u);
  EXPECT_GT(spec->stats().spec_draft_tokens, 0u);
}

TEST(SpeculativeEngineTest, RejectedDraftsLeaveTheStateOfARunWithoutThem) {
  ScriptedDrafter wrong(true);
  ExpectNoTraceOfRejectedDrafts(wrong);
}

// A model drafter holds blocks for a 7-token block before each proposal: what the 4 drafts
// do not keep goes back at once, so the free and cached blocks are still a plain run's.
TEST(SpeculativeEngineTest, ModelDrafterBlocksLeaveTheStateOfARunWithoutThem) {
  BlockDrafter wrong(7, true);
  ExpectNoTraceOfRejectedDrafts(wrong);
  EXPECT_EQ(wrong.uncovered(), 0);
}

// Drafts travel with the plan: workers run exactly rank 0's plans (drafts included) and hold
// the same KV; the output is the greedy reference.
TEST(SpeculativeEngineTest, TensorParallelRanksRunTheSameDrafts) {
  constexpr int kWorld = 2, kBlocks = 64;
  auto group = comm::CreateLocalGroup(kWorld, std::chrono::seconds(10));
  FakeModelRunner r0(kVocab, kBlocks, kBlockSize), r1(kVocab, kBlocks, kBlockSize);
  Status worker;
  std::thread t([&] { worker = RunWorkerLoop(*group[1], r1); });
  BroadcastingModelRunner rank0(group[0].get(), &r0);
  ScriptedDrafter drafter(false);
  const Outcome run = RunAll(Options(true, true, 16, kBlocks, 4), &rank0, &drafter);
  ASSERT_TRUE(rank0.Shutdown().ok());
  t.join();
  EXPECT_TRUE(worker.ok()) << worker.ToString();
  ExpectReference(run, 20);
  EXPECT_EQ(r1.plans(), r0.plans());
  EXPECT_EQ(r1.cache(), r0.cache());
  EXPECT_GT(run.stats.spec_accepted_tokens, 0u);
}

// A grammar that allows only tokens not divisible by 3, with rollback as the interface asks.
class NoThirds : public TokenConstraint {
 public:
  Status FillNextTokenMask(std::span<uint32_t> mask) override {
    for (int t = 0; t < kVocab; ++t) {
      if (t % 3 != 0) mask[t / 32] |= 1u << (t % 32);
    }
    return Status::Ok();
  }
  Status Accept(int32_t token) override {
    if (token % 3 == 0) return InvalidArgumentError("token " + std::to_string(token));
    return Status::Ok();
  }
  Status Rollback(int) override { return Status::Ok(); }
  bool IsTerminated() const override { return false; }
};
class NoThirdsSpec : public ConstraintSpec {
 public:
  Result<std::unique_ptr<TokenConstraint>> NewConstraint() const override {
    return std::unique_ptr<TokenConstraint>(new NoThirds());
  }
  std::string Describe() const override { return "no thirds"; }
};

// Drafts (the unconstrained greedy continuation: some break the grammar) never put a
// disallowed token in the output; the output equals the constrained run without drafts.
TEST(SpeculativeEngineTest, GrammarHoldsForAcceptedDrafts) {
  auto run = [](int k) {
    FakeModelRunner runner(kVocab, 64, kBlockSize);
    auto engine = Engine::Create(Options(true, true, 16, 64, k), &runner).value();
    ScriptedDrafter drafter(false);
    if (k > 0) engine->SetDrafter(&drafter);
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 24;
    p.constraint = std::make_shared<NoThirdsSpec>();
    std::map<uint64_t, std::vector<int32_t>> out;
    for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(engine->AddRequest(i, Prompt(9, 5 + i), p).ok());
    while (engine->HasUnfinished()) {
      auto step = engine->Step();
      EXPECT_TRUE(step.ok()) << step.status().ToString();
      if (!step.ok()) break;
      for (const TokenOutput& t : *step) out[t.seq_id].push_back(t.token);
    }
    return std::make_pair(out, engine->stats());
  };
  const auto [plain, plain_stats] = run(0);
  const auto [spec, spec_stats] = run(4);
  EXPECT_EQ(plain, spec);
  for (const auto& [id, tokens] : spec) {
    for (int32_t t : tokens) EXPECT_NE(t % 3, 0) << "request " << id;
  }
  EXPECT_GT(spec_stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec_stats.spec_accepted_tokens, spec_stats.spec_draft_tokens);
}

// The rejection sampler's output is distributed as the target's SamplingProbs. A draft token
// with target probability p is accepted with probability p; otherwise the token comes from the
// residual. Chi-square over the 6-token vocabulary (5 degrees of freedom) from 200,000 draws
// with a fixed seed: a correct sampler exceeds 20.52 (the 0.1% quantile) once in a thousand
// seeds, so the fixed seed passing is no accident; a sampler that drew the residual from p
// without removing the draft's mass would put p(d)(2 - p(d)) on d, 0.70 instead of 0.46 for
// draft 1: a chi-square in the tens of thousands (49,781 measured so).
TEST(RejectionSamplerTest, OutputDistributionIsTheTargets) {
  const std::vector<float> logits = {1.0f, 2.2f, 0.3f, -1.0f, 1.7f, 0.9f};
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 5;  // token 3 is masked out: it must never come back
  const std::vector<float> target = SamplingProbs(logits, p, {}, {});
  ASSERT_EQ(target[3], 0.0f);
  for (int32_t draft : {1, 4, 3}) {  // likely, middling, impossible
    std::mt19937_64 rng(1234 + draft);
    constexpr int kDraws = 200000;
    std::vector<int> counts(logits.size(), 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      bool ok = false;
      auto s = VerifyDraftToken(logits, p, {}, {}, draft, rng, &ok);
      ASSERT_TRUE(s.ok());
      ++counts[s->token];
      accepted += ok ? 1 : 0;
      if (ok) {
        ASSERT_EQ(s->token, draft);
      }
    }
    double chi2 = 0.0;
    for (size_t t = 0; t < logits.size(); ++t) {
      const double expected = target[t] * kDraws;
      if (expected == 0.0) {
        EXPECT_EQ(counts[t], 0) << "token " << t << " has no mass";
        continue;
      }
      chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    }
    EXPECT_LT(chi2, 20.52) << "draft " << draft;
    // Acceptance rate p(draft): within 5 standard deviations of a binomial.
    const double pd = target[draft];
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, pd,
                5.0 * std::sqrt(pd * (1 - pd) / kDraws) + 1e-12)
        << "draft " << draft;
  }
}

TEST(RejectionSamplerTest, GreedyAcceptsExactlyTheArgmax) {
  const std::vector<float> logits = {0.5f, 3.0f, 3.0f, -1.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  std::mt19937_64 rng(7);
  bool ok = false;
  auto s = VerifyDraftToken(logits, p, {}, {}, 1, rng, &ok);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(ok);
  EXPECT_EQ(s->token, 1);
  s = VerifyDraftToken(logits, p, {}, {}, 2, rng, &ok);  // a tie goes to the lower id
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(ok);
  EXPECT_EQ(s->token, 1);
}

}  // namespace
}  // namespace spark::engine::runtime
