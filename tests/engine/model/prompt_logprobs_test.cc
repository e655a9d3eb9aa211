// Prompt scoring (SamplingParams::prompt_logprobs) over the real Qwen3 and DeepSeek-V4 tiny
// fixtures on the CPU backend: every prompt token's log-probability equals Hugging Face's teacher-forced
// log_softmax (tests/fixtures/models/*/expected.json, `prompt_logprobs`, made by
// scripts/fixtures/make_model_fixtures.py) within the greedy tests' measure, max|ours - ref| /
// max|ref| < 1e-4 — with prompts prefilled in chunks, a second round whose prefix is cached
// (scored prompts recompute it), max_tokens 0 (score only) and 1, and at TP=2 (two ranks in
// threads, the vocabulary split across them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/communicator.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/plan_broadcast.h"

namespace spark::engine::model {
namespace {

constexpr int kBlockSize = 4, kBlocks = 96;
constexpr double kMaxRelError = 1e-4;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<double> logprobs;  // transformers': prompt tokens 1..n-1
};

std::string FixtureDir(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// Each case's transformers scores: the fixture's `prompt_logprobs`, or (fixtures made before
// them, the DeepSeek ones) the log-softmax of transformers' full-prompt `logits`, in double.
std::vector<Case> LoadCases(const std::string& name) {
  std::ifstream in(FixtureDir(name) + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : j["cases"]) {
    Case one{c.at("prompt_ids").get<std::vector<int32_t>>(), {}};
    if (c.contains("prompt_logprobs")) {
      one.logprobs = c["prompt_logprobs"].get<std::vector<double>>();
    } else {
      const auto logits = c.at("logits").get<std::vector<std::vector<double>>>();
      for (size_t i = 0; i + 1 < one.prompt.size(); ++i) {
        const double max = *std::max_element(logits[i].begin(), logits[i].end());
        double sum = 0;
        for (double l : logits[i]) sum += std::exp(l - max);
        one.logprobs.push_back(logits[i][one.prompt[i + 1]] - max - std::log(sum));
      }
    }
    cases.push_back(std::move(one));
  }
  return cases;
}

struct OneRank {
  backend::cpu::CpuBackend backend{1};
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelStepRunner> runner;
};

std::unique_ptr<OneRank> Load(const std::string& fixture, comm::Communicator* comm = nullptr,
                              ModelOptions options = {}) {
  auto r = std::make_unique<OneRank>();
  auto model = LoadModel(FixtureDir(fixture), r->backend, comm, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  r->model = std::move(*model);
  auto runner = ModelStepRunner::Create(r->model.get(), r->backend, kBlocks, kBlockSize,
                                        options.shard.rank == 0);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return nullptr;
  r->runner = std::move(*runner);
  return r;
}

runtime::EngineOptions Options() {
  runtime::EngineOptions o;
  o.scheduler.max_num_seqs = 8;
  o.scheduler.max_model_len = 96;
  o.scheduler.max_num_batched_tokens = 16;  // the 27-token prompt runs in chunks ...
  o.scheduler.max_scored_tokens = 7;         // ... of 7 while it is scored
  o.blocks.num_blocks = kBlocks;
  o.blocks.block_size = kBlockSize;
  o.argmax_plans = true;  // scored steps must go out as logits plans anyway
  return o;
}

// Two rounds of every case (the second finds the prefix cached): round 0 scores only
// (max_tokens 0), round 1 scores and generates one token. Returns each request's scores.
std::vector<std::vector<runtime::SampleResult>> Score(runtime::ModelRunner* runner,
                                                      const std::vector<Case>& cases) {
  std::vector<std::vector<runtime::SampleResult>> scores;
  auto engine = runtime::Engine::Create(Options(), runner);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return scores;
  std::map<uint64_t, std::vector<runtime::SampleResult>> out;
  uint64_t id = 0;
  for (int round = 0; round < 2; ++round) {
    runtime::SamplingParams params;
    params.temperature = 0.0f;
    params.prompt_logprobs = 2;
    params.max_tokens = round;
    params.ignore_eos = true;
    for (const Case& c : cases) {
      out[id];
      EXPECT_TRUE((*engine)->AddRequest(id++, c.prompt, params).ok());
    }
    while ((*engine)->HasUnfinished()) {
      auto step = (*engine)->Step();
      EXPECT_TRUE(step.ok()) << step.status().ToString();
      if (!step.ok()) return scores;
      for (runtime::TokenOutput& t : *step) {
        if (!t.prompt_logprobs.empty()) out[t.seq_id] = std::move(t.prompt_logprobs);
      }
    }
  }
  for (auto& [i, s] : out) scores.push_back(std::move(s));
  return scores;
}

void ExpectMatches(const std::vector<Case>& cases,
                   const std::vector<std::vector<runtime::SampleResult>>& scores) {
  ASSERT_EQ(scores.size(), 2 * cases.size());
  for (size_t r = 0; r < scores.size(); ++r) {
    const Case& c = cases[r % cases.size()];
    ASSERT_EQ(scores[r].size(), c.prompt.size() - 1) << "request " << r;
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < c.logprobs.size(); ++i) {
      const runtime::SampleResult& s = scores[r][i];
      EXPECT_EQ(s.token, c.prompt[i + 1]);
      max_ref = std::max(max_ref, std::fabs(c.logprobs[i]));
      max_diff = std::max(max_diff, std::fabs(double{s.logprob} - c.logprobs[i]));
      // The alternatives: the two most likely, ordered, and consistent with the rank.
      ASSERT_EQ(s.top_logprobs.size(), 2u);
      EXPECT_GE(s.top_logprobs[0].logprob, s.top_logprobs[1].logprob);
      EXPECT_GE(s.rank, 1);
      EXPECT_EQ(s.rank == 1, s.top_logprobs[0].token == s.token) << "position " << i + 1;
    }
    EXPECT_LT(max_diff / max_ref, kMaxRelError) << "request " << r << " (" << c.prompt.size()
                                                << " tokens)";
  }
}

class PromptLogprobsTest : public testing::TestWithParam<std::string> {};

TEST_P(PromptLogprobsTest, MatchesTransformersTeacherForcedLogSoftmax) {
  const std::vector<Case> cases = LoadCases(GetParam());
  auto rank = Load(GetParam());
  ASSERT_NE(rank, nullptr);
  ExpectMatches(cases, Score(rank->runner.get(), cases));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PromptLogprobsTest,
                         testing::Values("qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny",
                                         "deepseek-v41-tiny"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param == "qwen3-tiny"         ? "Dense"
                                  : info.param == "qwen3-moe-tiny"   ? "Moe"
                                  : info.param == "deepseek-v4-tiny" ? "DeepseekV4"
                                                                     : "DeepseekV41";
                         });

// TP=2: each rank holds half of the vocabulary's logits; the rows rank 0 scores are the
// gathered full rows, so the log-softmax runs over the whole vocabulary.
TEST(PromptLogprobsTpTest, TwoRanksMatchTransformers) {
  const std::vector<Case> cases = LoadCases("qwen3-tiny");
  auto group = comm::CreateLocalGroup(2, std::chrono::seconds(30));
  std::unique_ptr<OneRank> ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = Load("qwen3-tiny", group[r].get(), ModelOptions{{r, 2}});
    ASSERT_NE(ranks[r], nullptr);
  }
  Status worker;
  std::thread t([&] { worker = runtime::RunWorkerLoop(*group[1], *ranks[1]->runner); });
  runtime::BroadcastingModelRunner rank0(group[0].get(), ranks[0]->runner.get());
  const auto scores = Score(&rank0, cases);
  EXPECT_TRUE(rank0.Shutdown().ok());
  t.join();
  EXPECT_TRUE(worker.ok()) << worker.ToString();
  ExpectMatches(cases, scores);
}

}  // namespace
}  // namespace spark::engine::model
