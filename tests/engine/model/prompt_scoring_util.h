// What the prompt-scoring model tests share (CPU and CUDA backends): the fixtures' transformers
// scores, an engine that scores every case twice (the second round finds its prefix cached),
// and the comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/engine/model/fixture_rank.h"

namespace spark::engine::model::scoring_testing {

using fixture_testing::FixtureDir;
using fixture_testing::kBlocks;
using fixture_testing::kBlockSize;
constexpr double kMaxRelError = 1e-4;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<double> logprobs;  // transformers': prompt tokens 1..n-1
};

// Each case's transformers scores: the fixture's `prompt_logprobs`, or (fixtures made before
// them, the DeepSeek ones) the log-softmax of transformers' full-prompt `logits`, in double.
inline std::vector<Case> LoadCases(const std::string& name) {
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

inline runtime::EngineOptions Options() {
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
inline std::vector<std::vector<runtime::SampleResult>> Score(runtime::ModelRunner* runner,
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

inline void ExpectMatches(const std::vector<Case>& cases,
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

}  // namespace spark::engine::model::scoring_testing
