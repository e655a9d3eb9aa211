// What changes the logits before sampling: logit_bias, min_tokens and a grammar's token masks
// (through the runtime's own TokenConstraint interface, with a scripted model), the think-block
// gate, mask computation overlapping the forward, and the request timestamps.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "engine/runtime/engine.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

constexpr int kVocab = 97;

EngineOptions Options() {
  EngineOptions o;
  o.scheduler.max_model_len = 128;
  o.blocks.num_blocks = 64;
  o.blocks.block_size = 4;
  return o;
}

std::vector<int32_t> RunOne(Engine& engine, const std::vector<int32_t>& prompt,
                            const SamplingParams& params, TokenOutput* last = nullptr) {
  EXPECT_TRUE(engine.AddRequest(1, prompt, params).ok());
  std::vector<int32_t> out;
  for (int step = 0; engine.HasUnfinished() && step < 1000; ++step) {
    auto tokens = engine.Step();
    EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
    if (!tokens.ok()) break;
    for (const TokenOutput& t : *tokens) {
      if (t.has_token) out.push_back(t.token);
      if (t.finished && last != nullptr) *last = t;
    }
  }
  return out;
}

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

// A model that writes `script` (one token per output position) whatever came before; after
// the script it repeats its last token. Peaks at 10, other tokens at 0.
class ScriptedRunner : public ModelRunner {
 public:
  ScriptedRunner(std::vector<int32_t> script, int prompt_len)
      : script_(std::move(script)), prompt_len_(prompt_len) {}
  int vocab_size() const override { return kVocab; }
  Result<std::vector<float>> Run(const StepPlan& plan) override {
    std::vector<float> logits;
    for (const StepPlanEntry& e : plan.entries) {
      if (!e.needs_logits) continue;
      const size_t n = e.start_pos + e.token_ids.size() - prompt_len_;
      std::vector<float> row(kVocab, 0.0f);
      row[script_[std::min(n, script_.size() - 1)]] = 10.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

 private:
  const std::vector<int32_t> script_;
  const size_t prompt_len_;
};

// A grammar that spells `word` and then allows only `stop`; terminated after `stop`.
class SpellConstraint : public TokenConstraint {
 public:
  SpellConstraint(std::vector<int32_t> word, int32_t stop) : word_(std::move(word)), stop_(stop) {}
  Status FillNextTokenMask(std::span<uint32_t> mask) override {
    std::fill(mask.begin(), mask.end(), 0u);
    const int32_t t = pos_ < word_.size() ? word_[pos_] : stop_;
    mask[t / 32] |= 1u << (t % 32);
    return Status::Ok();
  }
  Status Accept(int32_t token) override {
    const int32_t want = pos_ < word_.size() ? word_[pos_] : stop_;
    if (token != want) return InvalidArgumentError("not the next letter");
    ++pos_;
    return Status::Ok();
  }
  Status Rollback(int n) override {
    pos_ -= n;
    return Status::Ok();
  }
  bool IsTerminated() const override { return pos_ > word_.size(); }

 private:
  const std::vector<int32_t> word_;
  const int32_t stop_;
  size_t pos_ = 0;
};

class SpellSpec : public ConstraintSpec {
 public:
  SpellSpec(std::vector<int32_t> word, int32_t stop) : word_(std::move(word)), stop_(stop) {}
  Result<std::unique_ptr<TokenConstraint>> NewConstraint() const override {
    return std::unique_ptr<TokenConstraint>(new SpellConstraint(word_, stop_));
  }
  std::string Describe() const override { return "spell"; }

 private:
  const std::vector<int32_t> word_;
  const int32_t stop_;
};

TEST(EngineLogitsTest, LogitBiasPlus100ForcesATokenAndMinus100BansOne) {
  FakeModelRunner runner(kVocab, 64, 4);
  const std::vector<int32_t> prompt = {5, 6, 7};
  const std::vector<int32_t> reference = FakeModelRunner::ReferenceGreedy(prompt, 6, kVocab);
  SamplingParams forced = Greedy(6);
  forced.logit_bias = {{42, 100.0f}};
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(RunOne(**engine, prompt, forced), std::vector<int32_t>(6, 42));

  SamplingParams banned = Greedy(6);
  banned.logit_bias = {{reference[0], -100.0f}};
  engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> out = RunOne(**engine, prompt, banned);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_NE(out[0], reference[0]);
  EXPECT_EQ(std::count(out.begin(), out.end(), reference[0]), 0);
}

TEST(EngineLogitsTest, LogitBiasOutsideTheVocabularyIsRefused) {
  FakeModelRunner runner(kVocab, 64, 4);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p = Greedy(2);
  p.logit_bias = {{kVocab, 1.0f}};
  EXPECT_EQ((*engine)->AddRequest(1, {1, 2}, p).code(), StatusCode::kInvalidArgument);
}

TEST(EngineLogitsTest, MinTokensHoldsBackEosAndStopTokens) {
  FakeModelRunner runner(kVocab, 64, 4);
  const std::vector<int32_t> prompt = {9, 8, 7};
  const std::vector<int32_t> reference = FakeModelRunner::ReferenceGreedy(prompt, 1, kVocab);
  EngineOptions o = Options();
  o.eos_token_id = reference[0];  // The model would stop at once.
  auto engine = Engine::Create(o, &runner);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(RunOne(**engine, prompt, Greedy(8)).size(), 1u);
  SamplingParams p = Greedy(8);
  p.min_tokens = 4;
  engine = Engine::Create(o, &runner);
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> out = RunOne(**engine, prompt, p);
  ASSERT_GE(out.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(out[i], reference[0]) << i;
}

TEST(EngineLogitsTest, GrammarMaskOverridesTheModel) {
  const std::vector<int32_t> prompt = {1, 2, 3};
  ScriptedRunner runner({50, 51, 52, 53, 54, 55}, static_cast<int>(prompt.size()));
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p = Greedy(20);
  p.temperature = 1.0f;  // Sampling too must stay inside the mask.
  p.stop_token_ids = {96};
  p.constraint = std::make_shared<SpellSpec>(std::vector<int32_t>{10, 11, 12}, 96);
  TokenOutput last;
  EXPECT_EQ(RunOne(**engine, prompt, p, &last), (std::vector<int32_t>{10, 11, 12, 96}));
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
}

TEST(EngineLogitsTest, ReasoningBeforeTheGrammarIsFree) {
  constexpr int32_t kBegin = 90, kEnd = 91, kStop = 96;
  const std::vector<int32_t> prompt = {1, 2, 3};
  // The model opens a think block, thinks 7 8, closes it; then the grammar spells 10 11.
  ScriptedRunner runner({kBegin, 7, 8, kEnd, 60, 61, 62}, static_cast<int>(prompt.size()));
  SamplingParams p = Greedy(20);
  p.stop_token_ids = {kStop};
  p.constraint = std::make_shared<SpellSpec>(std::vector<int32_t>{10, 11}, kStop);
  p.constraint_gate = {kBegin, kEnd, /*starts_in_reasoning=*/false, /*may_open=*/true};
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(RunOne(**engine, prompt, p),
            (std::vector<int32_t>{kBegin, 7, 8, kEnd, 10, 11, kStop}));
  // Without may_open the first token is already the grammar's.
  p.constraint_gate.may_open = false;
  engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(RunOne(**engine, prompt, p), (std::vector<int32_t>{10, 11, kStop}));
  // A prompt that ends inside the think block: free until kEnd.
  ScriptedRunner inside({7, kEnd, 60}, static_cast<int>(prompt.size()));
  p.constraint_gate = {kBegin, kEnd, /*starts_in_reasoning=*/true, /*may_open=*/false};
  engine = Engine::Create(Options(), &inside);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(RunOne(**engine, prompt, p), (std::vector<int32_t>{7, kEnd, 10, 11, kStop}));
}

// The masks of a step are filled while the model's forward runs: each mask waits (up to 10 s) for
// the forward to begin and the forward for the mask to be filled; done one after the other
// instead, both would time out and the mask would record no forward in progress.
TEST(EngineLogitsTest, MasksAreFilledWhileTheForwardRuns) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool in_forward = false;
    int masks_during_forward = 0;
    int masks = 0;
  };
  auto shared = std::make_shared<Shared>();
  class WaitingRunner : public ModelRunner {
   public:
    explicit WaitingRunner(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
    int vocab_size() const override { return kVocab; }
    Result<std::vector<float>> Run(const StepPlan& plan) override {
      std::unique_lock lock(s_->mu);
      s_->in_forward = true;
      s_->cv.notify_all();
      const int before = s_->masks;
      s_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return s_->masks > before; });
      s_->in_forward = false;
      return std::vector<float>(plan.num_logits_rows() * kVocab, 0.0f);
    }
    std::shared_ptr<Shared> s_;
  };
  class RecordingSpec : public ConstraintSpec {
   public:
    explicit RecordingSpec(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
    Result<std::unique_ptr<TokenConstraint>> NewConstraint() const override {
      class Recording : public SpellConstraint {
       public:
        explicit Recording(std::shared_ptr<Shared> s) : SpellConstraint({4, 4, 4}, 96), s_(s) {}
        Status FillNextTokenMask(std::span<uint32_t> mask) override {
          {
            std::unique_lock lock(s_->mu);
            s_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return s_->in_forward; });
            s_->masks_during_forward += s_->in_forward ? 1 : 0;
            ++s_->masks;
          }
          s_->cv.notify_all();
          return SpellConstraint::FillNextTokenMask(mask);
        }
        std::shared_ptr<Shared> s_;
      };
      return std::unique_ptr<TokenConstraint>(new Recording(s_));
    }
    std::string Describe() const override { return "recording"; }
    std::shared_ptr<Shared> s_;
  };
  WaitingRunner runner(shared);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p = Greedy(10);
  p.stop_token_ids = {96};
  p.constraint = std::make_shared<RecordingSpec>(shared);
  EXPECT_EQ(RunOne(**engine, {1, 2}, p), (std::vector<int32_t>{4, 4, 4, 96}));
  EXPECT_EQ(shared->masks, 4);
  EXPECT_EQ(shared->masks_during_forward, 4);
}

TEST(EngineLogitsTest, FinishedRequestsCarryTheirTimes) {
  FakeModelRunner runner(kVocab, 64, 4);
  auto engine = Engine::Create(Options(), &runner);
  ASSERT_TRUE(engine.ok());
  TokenOutput last;
  SamplingParams p = Greedy(5);
  EXPECT_EQ(RunOne(**engine, {3, 1, 4, 1, 5}, p, &last).size(), 5u);
  const RequestTimes& t = last.times;
  const RequestTimes::Clock::time_point unset;
  EXPECT_NE(t.queued, unset);
  EXPECT_LE(t.queued, t.scheduled);
  EXPECT_LE(t.scheduled, t.first_token);
  EXPECT_LT(t.first_token, t.last_token);
}

}  // namespace
}  // namespace spark::engine::runtime
