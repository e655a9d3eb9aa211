// ModelStepRunner on the CPU backend with the tiny fixtures: run-argmax plans give the argmax
// ids of the logits a plain plan returns; decode graph steps are asked for only where they
// may run (greedy decode steps of a dense one-rank model, when enabled); a backend error
// fails the step.
#include "engine/model/step_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/runtime/engine.h"

namespace spark::engine::model {
namespace {

constexpr int kBlockSize = 4, kBlocks = 32;

std::string FixtureDir(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// The CPU backend, recording graph requests (refusing them unless told to accept: either way
// the steps run as usual), with an error it can be told to report.
class RecordingBackend : public backend::cpu::CpuBackend {
 public:
  RecordingBackend() : CpuBackend(2) {}
  bool BeginDecodeGraph(const std::string& key, int table_blocks) override {
    requests.emplace_back(key, table_blocks);
    return accept;
  }
  Status status() const override { return error; }
  std::vector<std::pair<std::string, int>> requests;
  bool accept = false;
  Status error;
};

struct Setup {
  RecordingBackend backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelStepRunner> runner;
};

std::unique_ptr<Setup> Make(const std::string& fixture, bool decode_graphs) {
  auto s = std::make_unique<Setup>();
  auto model = LoadModel(FixtureDir(fixture), s->backend, nullptr, {});
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return nullptr;
  s->model = std::move(*model);
  auto runner =
      ModelStepRunner::Create(s->model.get(), s->backend, kBlocks, kBlockSize, true, decode_graphs);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return nullptr;
  s->runner = std::move(*runner);
  return s;
}

// One plan: entry i runs tokens[i] from position start[i], blocks 8i..8i+7, logits wanted.
runtime::StepPlan Plan(runtime::StepCommand command,
                       const std::vector<std::vector<int32_t>>& tokens,
                       const std::vector<int32_t>& start) {
  runtime::StepPlan plan;
  plan.command = command;
  for (size_t i = 0; i < tokens.size(); ++i) {
    runtime::StepPlanEntry e;
    e.seq_id = i;
    e.token_ids = tokens[i];
    e.start_pos = start[i];
    for (int b = 0; b < 8; ++b) e.block_table.push_back(static_cast<int32_t>(i * 8 + b));
    e.needs_logits = true;
    plan.entries.push_back(e);
  }
  return plan;
}

std::vector<int32_t> Argmax(const std::vector<float>& rows, int vocab) {
  std::vector<int32_t> ids;
  for (size_t r = 0; r * vocab < rows.size(); ++r) {
    ids.push_back(static_cast<int32_t>(
        std::max_element(rows.begin() + r * vocab, rows.begin() + (r + 1) * vocab) -
        (rows.begin() + r * vocab)));
  }
  return ids;
}

// Runs prefill + 4 decode steps with `command` on every step; returns all picked ids.
std::vector<int32_t> Generate(Setup& s, runtime::StepCommand command) {
  const int vocab = s.runner->vocab_size();
  std::vector<std::vector<int32_t>> tokens = {{5, 17, 42, 7, 9, 11}, {3, 1, 4, 1, 5, 9, 2, 6, 5}};
  std::vector<int32_t> start = {0, 0}, all;
  for (int step = 0; step < 5; ++step) {
    auto out = s.runner->Run(Plan(command, tokens, start));
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return all;
    const std::vector<int32_t> ids = command == runtime::StepCommand::kRunArgMax
                                         ? std::vector<int32_t>(out->begin(), out->end())
                                         : Argmax(*out, vocab);
    EXPECT_EQ(ids.size(), 2u);
    for (size_t i = 0; i < tokens.size(); ++i) {
      start[i] += static_cast<int32_t>(tokens[i].size());
      tokens[i] = {ids[i]};
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

TEST(ModelStepRunnerTest, ArgMaxPlansPickTheLogitsArgmax) {
  for (const std::string fixture : {"qwen3-tiny", "qwen3-moe-tiny"}) {
    auto logits = Make(fixture, false), argmax = Make(fixture, false);
    ASSERT_TRUE(logits && argmax);
    EXPECT_EQ(Generate(*argmax, runtime::StepCommand::kRunArgMax),
              Generate(*logits, runtime::StepCommand::kRun))
        << fixture;
  }
}

TEST(ModelStepRunnerTest, DecodeGraphsAskedOnlyForGreedyDecodeOfDenseModels) {
  auto on = Make("qwen3-tiny", true);
  ASSERT_TRUE(on);
  Generate(*on, runtime::StepCommand::kRunArgMax);
  // Four decode steps of two sequences; the first runs eagerly (the batch size's first), the
  // others ask; contexts of 7..13 tokens need up to 4 blocks of 4.
  ASSERT_EQ(on->backend.requests.size(), 3u);
  for (const auto& [key, blocks] : on->backend.requests) {
    EXPECT_EQ(key, "decode-first-b2");  // refused: no step is launched ahead of it
    EXPECT_EQ(blocks, 4);
  }
  Generate(*on, runtime::StepCommand::kRun);  // plain plans: logits leave, no graphs
  EXPECT_EQ(on->backend.requests.size(), 3u);
  const runtime::DecodeStepCounts counts = on->runner->decode_steps();
  EXPECT_EQ(counts.graph, 0u);  // the backend refused every one
  EXPECT_EQ(counts.eager.at("the first decode step of its batch size (builds tables, tunes GEMMs)"),
            1u);
  EXPECT_EQ(counts.eager.at("the cpu backend ran it eagerly"), 3u);
  EXPECT_EQ(counts.eager.at("a sampled or scored step (graphs take greedy ones)"), 4u);

  auto off = Make("qwen3-tiny", false);
  auto moe = Make("qwen3-moe-tiny", true);
  ASSERT_TRUE(off && moe);
  Generate(*off, runtime::StepCommand::kRunArgMax);
  Generate(*moe, runtime::StepCommand::kRunArgMax);
  EXPECT_TRUE(off->backend.requests.empty());
  EXPECT_TRUE(moe->backend.requests.empty());  // MoE layers read expert counts back
  EXPECT_TRUE(off->runner->decode_steps().eager.empty());  // graphs not asked for: no fallback
  EXPECT_EQ(moe->runner->decode_steps().eager.at("MoE layers read their expert counts back to "
                                                 "the host"),
            4u);
}

TEST(ModelStepRunnerTest, BackendErrorFailsTheStep) {
  auto s = Make("qwen3-tiny", false);
  ASSERT_TRUE(s);
  s->backend.error = InternalError("device lost");
  for (auto command : {runtime::StepCommand::kRun, runtime::StepCommand::kRunArgMax}) {
    auto out = s->runner->Run(Plan(command, {{5, 17}}, {0}));
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("device lost"), std::string::npos);
  }
}

// With graph steps accepted (the CPU backend then runs them as usual), steady greedy decode
// launches each next step ahead, fed the ids just picked, and the next Run takes it; a plan that
// is not that step drops it and runs as usual. The ids match a runner without graphs.
TEST(ModelStepRunnerTest, LaunchesTheNextDecodeStepAheadAndDropsItForAnotherPlan) {
  auto ref = Make("qwen3-tiny", false), ahead = Make("qwen3-tiny", true);
  ASSERT_TRUE(ref && ahead);
  ahead->backend.accept = true;
  const std::vector<int32_t> want = Generate(*ref, runtime::StepCommand::kRunArgMax);
  EXPECT_EQ(Generate(*ahead, runtime::StepCommand::kRunArgMax), want);
  // Prefill (no graph), decode step 1 eagerly (the batch size's first), step 2 with the host's
  // ids, then each step launched ahead by the one before: steps 3-4 taken, step 5 in flight.
  EXPECT_EQ(ahead->runner->launched_ahead(), 3);
  EXPECT_EQ(ahead->runner->taken_ahead(), 2);
  EXPECT_EQ(ahead->runner->decode_steps().graph, 3u);  // steps 2-4 (step 5 is not taken yet)
  std::vector<std::string> keys;
  for (const auto& request : ahead->backend.requests) keys.push_back(request.first);
  EXPECT_EQ(keys, (std::vector<std::string>{"decode-first-b2", "decode-fed-b2", "decode-fed-b2",
                                            "decode-fed-b2"}));
  // Step 5 for the first sequence alone: not the step launched ahead (two sequences).
  const int32_t last = want[want.size() - 2];
  const runtime::StepPlan alone = Plan(runtime::StepCommand::kRunArgMax, {{last}}, {10});
  auto got = ahead->runner->Run(alone);
  auto expected = ref->runner->Run(alone);
  ASSERT_TRUE(got.ok() && expected.ok()) << got.status().message();
  EXPECT_EQ(*got, *expected);
  EXPECT_EQ(ahead->runner->taken_ahead(), 2);
  // A new batch size: its first step runs eagerly, so nothing goes ahead of it.
  EXPECT_EQ(ahead->runner->launched_ahead(), 3);
  // A plain plan (logits) drops the step in flight too.
  const int32_t next = static_cast<int32_t>((*got)[0]);
  auto logits = ahead->runner->Run(Plan(runtime::StepCommand::kRun, {{next}}, {11}));
  auto logits_ref = ref->runner->Run(Plan(runtime::StepCommand::kRun, {{next}}, {11}));
  ASSERT_TRUE(logits.ok() && logits_ref.ok());
  EXPECT_EQ(Argmax(*logits, ahead->runner->vocab_size()),
            Argmax(*logits_ref, ref->runner->vocab_size()));
  EXPECT_EQ(ahead->runner->taken_ahead(), 2);
}

// The runtime engine over runners with and without steps launched ahead: requests that end at
// different steps, one that joins on step 3 and one that takes a finished one's place on step 5
// (so plans change under the steps in flight, once without changing their size) give the same
// tokens, and steps launched ahead were both taken and dropped.
TEST(ModelStepRunnerTest, EngineTokensAreTheSameWithStepsLaunchedAhead) {
  auto generate = [](model::Setup& s) {
    runtime::EngineOptions options;
    options.scheduler.max_num_seqs = 4;
    options.scheduler.max_model_len = 32;
    options.blocks.num_blocks = kBlocks;
    options.blocks.block_size = kBlockSize;
    options.argmax_plans = true;
    std::map<uint64_t, std::vector<int32_t>> tokens;
    auto engine = runtime::Engine::Create(options, s.runner.get());
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    if (!engine.ok()) return tokens;
    auto add = [&](uint64_t id, std::vector<int32_t> prompt, int max_tokens) {
      runtime::SamplingParams params;
      params.temperature = 0.0f;
      params.max_tokens = max_tokens;
      params.ignore_eos = true;
      const Status added = (*engine)->AddRequest(id, std::move(prompt), params);
      EXPECT_TRUE(added.ok()) << added.message();
    };
    add(1, {5, 17, 42}, 5);
    add(2, {3, 1, 4, 1, 5}, 11);
    for (int step = 0; (*engine)->HasUnfinished() && step < 64; ++step) {
      if (step == 3) add(3, {7, 7, 2, 9}, 5);
      // Request 1 gave its 5th and last token on step 4 (no sequence needed a new block for the
      // step after): a one-token prompt takes its place, so step 5's plan has as many entries as
      // the step launched ahead, for other sequences.
      if (step == 5) add(4, {11}, 4);
      auto out = (*engine)->Step();
      EXPECT_TRUE(out.ok()) << out.status().message();
      if (!out.ok()) break;
      for (const runtime::TokenOutput& o : *out) {
        if (o.has_token) tokens[o.seq_id].push_back(o.token);
      }
    }
    return tokens;
  };
  auto ref = Make("qwen3-tiny", false), ahead = Make("qwen3-tiny", true);
  ASSERT_TRUE(ref && ahead);
  ahead->backend.accept = true;
  const auto want = generate(*ref);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(want.at(2).size(), 11u);
  EXPECT_EQ(generate(*ahead), want);
  EXPECT_GT(ahead->runner->taken_ahead(), 0);
  EXPECT_GT(ahead->runner->launched_ahead(), ahead->runner->taken_ahead() + 1);  // some dropped
}

}  // namespace
}  // namespace spark::engine::model
