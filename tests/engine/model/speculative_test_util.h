// What the speculative-decoding model tests share (CPU and CUDA backends): the prompts, an
// oracle drafter that spoils part of each draft, and a greedy run of the engine over them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/engine/model/fixture_rank.h"

namespace spark::engine::model::speculative_testing {

using fixture_testing::FixtureDir;
using fixture_testing::kBlocks;
using fixture_testing::kBlockSize;

// A repetitive prompt (its second half repeats the first: the n-gram drafter finds matches), a
// plain one, a long one (prefilled in chunks under a 16-token budget) and a one-token prompt.
inline std::vector<std::vector<int32_t>> Prompts() {
  std::vector<int32_t> repeated = {5, 17, 42, 7, 9, 11, 30, 2};
  repeated.insert(repeated.end(), repeated.begin(), repeated.end());
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 41; ++i) long_prompt.push_back((i * 13 + 3) % 97);
  return {repeated, {3, 1, 4, 1, 5, 9, 2, 6}, long_prompt, {8}};
}

// Knows each prompt's greedy continuation (from a run without drafts) and proposes it, with
// one spoiled token at a position that cycles, so every acceptance length occurs.
class OracleDrafter : public runtime::Drafter {
 public:
  explicit OracleDrafter(std::vector<std::vector<int32_t>> full) : full_(std::move(full)) {}
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) override {
    for (const std::vector<int32_t>& f : full_) {
      if (f.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), f.begin())) {
        continue;
      }
      const size_t n = std::min<size_t>(max_tokens, f.size() - tokens.size());
      std::vector<int32_t> out(f.begin() + tokens.size(), f.begin() + tokens.size() + n);
      const size_t wrong = calls_++ % (n + 1);
      if (wrong < n) out[wrong] = (out[wrong] + 1) % 97;
      return out;
    }
    return {};
  }

 private:
  std::vector<std::vector<int32_t>> full_;
  size_t calls_ = 0;
};

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;  // per request: two rounds of Prompts()
  runtime::EngineStats stats;
};

inline runtime::EngineOptions Options(int k, bool argmax_plans) {
  runtime::EngineOptions o;
  o.scheduler.max_num_seqs = 8;
  o.scheduler.max_model_len = 96;
  o.scheduler.max_num_batched_tokens = 16;  // the long prompt runs in chunks
  o.blocks.num_blocks = kBlocks;
  o.blocks.block_size = kBlockSize;
  o.argmax_plans = argmax_plans;
  if (k > 0) {
    o.speculative.method = "ngram";
    o.speculative.num_speculative_tokens = k;
  }
  return o;
}

// Two rounds of the prompts (the second hits the prefix cache), greedy, 20 tokens each.
inline RunResult Generate(runtime::ModelRunner* runner, const runtime::EngineOptions& options,
                   runtime::Drafter* drafter) {
  RunResult r;
  auto engine = runtime::Engine::Create(options, runner);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return r;
  if (drafter != nullptr) (*engine)->SetDrafter(drafter);
  runtime::SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 20;
  params.ignore_eos = true;
  const auto prompts = Prompts();
  std::map<uint64_t, std::vector<int32_t>> out;
  uint64_t id = 0;
  for (int round = 0; round < 2; ++round) {
    for (const auto& p : prompts) {
      out[id];
      EXPECT_TRUE((*engine)->AddRequest(id++, p, params).ok());
    }
    while ((*engine)->HasUnfinished()) {
      auto step = (*engine)->Step();
      EXPECT_TRUE(step.ok()) << step.status().ToString();
      if (!step.ok()) return r;
      for (const runtime::TokenOutput& t : *step) {
        if (t.has_token) out[t.seq_id].push_back(t.token);
      }
    }
  }
  for (auto& [i, tokens] : out) r.tokens.push_back(std::move(tokens));
  r.stats = (*engine)->stats();
  return r;
}

// Prompt + greedy output of each request of the plain run, for the oracle.
inline std::vector<std::vector<int32_t>> FullSequences(const RunResult& plain) {
  const auto prompts = Prompts();
  std::vector<std::vector<int32_t>> full;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> f = prompts[i];
    f.insert(f.end(), plain.tokens[i].begin(), plain.tokens[i].end());
    full.push_back(f);
  }
  return full;
}

}  // namespace spark::engine::model::speculative_testing
