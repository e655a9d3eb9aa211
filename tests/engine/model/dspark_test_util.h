// What the DSpark tests share (CPU and CUDA backends): the fixture with its random draft stack
// (tests/fixtures/models/deepseek-v41-tiny/dspark, scripts/fixtures/make_dspark_fixture.py), a
// drafter that records every block the engine's model drafter makes, and the check of those
// drafts and the greedy tokens against the fixture's torch reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/model_drafter.h"
#include "tests/engine/model/fixture_rank.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model::dspark_testing {

inline constexpr char kFixture[] = "deepseek-v41-tiny/dspark";

inline ModelOptions WithDraft() {
  ModelOptions o;
  o.load_draft = true;
  return o;
}

inline runtime::EngineOptions DsparkOptions(int k, int budget) {
  runtime::EngineOptions o = speculative_testing::Options(k, /*argmax_plans=*/false);
  o.scheduler.max_num_batched_tokens = budget;
  o.speculative.method = "dspark";
  return o;
}

// Records what the engine's model drafter proposes: (sequence id, its last position) -> the
// anchor and the whole draft block; and the most blocks one draft forward took.
class RecordingDrafter : public runtime::Drafter {
 public:
  RecordingDrafter(runtime::ModelRunner* runner, int block) : inner_(runner, block) {}
  std::vector<int32_t> Propose(std::span<const int32_t>, int) override { return {}; }
  int block_tokens() const override { return inner_.block_tokens(); }
  std::vector<std::vector<int32_t>> ProposeForAll(
      std::span<const runtime::DraftRequest> requests) override {
    // Whole blocks, as the reference drafts them; the engine gets what fits each room.
    std::vector<runtime::DraftRequest> whole(requests.begin(), requests.end());
    for (runtime::DraftRequest& r : whole) r.max_tokens = inner_.block_tokens();
    std::vector<std::vector<int32_t>> all = inner_.ProposeForAll(whole);
    largest_batch = std::max(largest_batch, requests.size());
    for (size_t k = 0; k < requests.size(); ++k) {
      const runtime::Sequence& seq = *requests[k].seq;
      drafts[{seq.id(), seq.num_tokens() - 1}] = {seq.token_ids().back(), all[k]};
      if (all[k].size() > static_cast<size_t>(requests[k].max_tokens)) {
        all[k].resize(requests[k].max_tokens);
      }
    }
    return all;
  }
  Status status() const override { return inner_.status(); }

  std::map<std::pair<uint64_t, int>, std::pair<int32_t, std::vector<int32_t>>> drafts;
  size_t largest_batch = 0;

 private:
  runtime::ModelDrafter inner_;
};

inline nlohmann::json Expected() {
  std::ifstream f(fixture_testing::FixtureDir(kFixture) + "/expected_dspark.json");
  EXPECT_TRUE(f.good()) << "no expected_dspark.json in " << kFixture;
  return f.good() ? nlohmann::json::parse(f) : nlohmann::json();
}

// Runs the expected cases greedily with DSpark drafting on `runner`, twice (the second time the
// prompts' full blocks come from the prefix cache), and checks every draft the engine made, and
// the greedy tokens, against the reference. One case at a time, or (`together`) all cases in
// one batch, so a step drafts for several sequences in one forward.
inline void ExpectReferenceDrafts(runtime::ModelRunner* runner, int budget,
                                  bool together = false) {
  const nlohmann::json expected = Expected();
  ASSERT_EQ(expected.value("schema", ""), "spark-dspark-fixture/v1");
  const int block = expected["block_size"].get<int>();
  ASSERT_TRUE(runner->has_draft_model());
  auto engine = runtime::Engine::Create(DsparkOptions(block, budget), runner);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  RecordingDrafter recorder(runner, block);
  (*engine)->SetDrafter(&recorder);
  const std::vector<nlohmann::json> cases = expected["cases"];
  uint64_t id = 0;
  int checked = 0;
  const size_t group = together ? cases.size() : 1;
  for (size_t first = 0; first < cases.size(); first += group) {
    for (int round = 0; round < 2; ++round) {
      recorder.drafts.clear();
      std::map<uint64_t, const nlohmann::json*> case_of;
      for (size_t c = first; c < first + group; ++c) {
        const auto greedy = cases[c]["greedy"].get<std::vector<int32_t>>();
        runtime::SamplingParams params;
        params.temperature = 0.0f;
        params.max_tokens = static_cast<int>(greedy.size());
        params.ignore_eos = true;
        ASSERT_TRUE((*engine)
                        ->AddRequest(id, cases[c]["prompt"].get<std::vector<int32_t>>(), params)
                        .ok());
        case_of[id++] = &cases[c];
      }
      std::map<uint64_t, std::vector<int32_t>> out;
      while ((*engine)->HasUnfinished()) {
        auto step = (*engine)->Step();
        ASSERT_TRUE(step.ok()) << step.status().ToString();
        for (const runtime::TokenOutput& t : *step) {
          if (t.has_token) out[t.seq_id].push_back(t.token);
        }
      }
      for (const auto& [request, c] : case_of) {
        EXPECT_EQ(out[request], (*c)["greedy"].get<std::vector<int32_t>>()) << "round " << round;
      }
      EXPECT_FALSE(recorder.drafts.empty());
      for (const auto& [at, drafted] : recorder.drafts) {
        const nlohmann::json& c = *case_of.at(at.first);
        const nlohmann::json* step = nullptr;
        for (const nlohmann::json& s : c["steps"]) {
          if (s["q0"].get<int>() == at.second) step = &s;
        }
        ASSERT_NE(step, nullptr) << "a draft at position " << at.second << " the reference lacks";
        EXPECT_EQ(drafted.first, (*step)["anchor"].get<int32_t>()) << "position " << at.second;
        EXPECT_EQ(drafted.second, (*step)["drafts"].get<std::vector<int32_t>>())
            << "round " << round << ", anchor at position " << at.second;
        ++checked;
      }
    }
  }
  EXPECT_GT((*engine)->stats().prefix_hits, 0u) << "the second rounds hit the prefix cache";
  EXPECT_GE(checked, 20);
  if (together) {
    EXPECT_GT(recorder.largest_batch, 1u) << "no draft forward took two blocks";
  }
}

}  // namespace spark::engine::model::dspark_testing
