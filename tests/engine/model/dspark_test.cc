// DSpark drafting (DeepSeek-V4.1's draft stack, engine/model/deepseek_v41/dspark.h) on the CPU
// backend over the tiny fixture with a random draft stack
// (tests/fixtures/models/deepseek-v41-tiny/dspark, scripts/fixtures/make_dspark_fixture.py):
// the drafts of every decode step equal the reference's, also when the prompt's blocks come from
// the prefix cache and when the prompt is prefilled in chunks; greedy output with DSpark equals
// greedy output without it (two rounds of prompts: chunked prefill, prefix-cache hits, a batch of
// drafted and undrafted sequences).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include <thread>

#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v41/dspark_weights.h"
#include "engine/model/model_family.h"
#include "engine/runtime/model_drafter.h"
#include "engine/runtime/plan_broadcast.h"
#include "tests/engine/core/safetensors_writer.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model {
namespace {

using namespace speculative_testing;
using fixture_testing::Load;

constexpr char kFixture[] = "deepseek-v41-tiny/dspark";

ModelOptions WithDraft() {
  ModelOptions o;
  o.load_draft = true;
  return o;
}

runtime::EngineOptions DsparkOptions(int k, int budget) {
  runtime::EngineOptions o = Options(k, /*argmax_plans=*/false);
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

nlohmann::json Expected() {
  std::ifstream f(fixture_testing::FixtureDir(kFixture) + "/expected_dspark.json");
  EXPECT_TRUE(f.good()) << "no expected_dspark.json in " << kFixture;
  return f.good() ? nlohmann::json::parse(f) : nlohmann::json();
}

// Runs the expected cases greedily with DSpark drafting on `runner`, twice (the second time the
// prompts' full blocks come from the prefix cache), and checks every draft the engine made, and
// the greedy tokens, against the reference. One case at a time, or (`together`) all cases in
// one batch, so a step drafts for several sequences in one forward.
void ExpectReferenceDrafts(runtime::ModelRunner* runner, int budget, bool together = false) {
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

TEST(DsparkTest, DraftsAreTheReferences) {
  auto rank = Load(kFixture, nullptr, WithDraft());
  ASSERT_NE(rank, nullptr);
  ExpectReferenceDrafts(rank->runner.get(), 256);
}

// All cases in one batch: a step's blocks run in one draft forward, each sequence's drafts
// still the reference's.
TEST(DsparkTest, BatchedDraftsAreTheReferences) {
  auto rank = Load(kFixture, nullptr, WithDraft());
  ASSERT_NE(rank, nullptr);
  ExpectReferenceDrafts(rank->runner.get(), 256, /*together=*/true);
}

TEST(DsparkTest, DraftsAreTheReferencesAfterChunkedPrefill) {
  auto rank = Load(kFixture, nullptr, WithDraft());
  ASSERT_NE(rank, nullptr);
  ExpectReferenceDrafts(rank->runner.get(), 5);
}

// Two ranks in threads, the stack sharded by heads, groups and experts: rank 0 sends a draft
// plan per step (every drafting sequence's block), the worker drafts in lockstep, and rank 0's
// drafts are the reference's.
TEST(DsparkTest, TensorParallelDraftsAreTheReferences) {
  auto group = comm::CreateLocalGroup(2, std::chrono::seconds(20));
  std::unique_ptr<fixture_testing::OneRank> ranks[2];
  for (int r = 0; r < 2; ++r) {
    ModelOptions o = WithDraft();
    o.shard = {r, 2};
    o.moe_sharding = MoeSharding::kByExpert;
    ranks[r] = Load(kFixture, group[r].get(), o);
    ASSERT_NE(ranks[r], nullptr);
  }
  Status worker;
  std::thread t([&] { worker = runtime::RunWorkerLoop(*group[1], *ranks[1]->runner); });
  runtime::BroadcastingModelRunner rank0(group[0].get(), ranks[0]->runner.get());
  ExpectReferenceDrafts(&rank0, 256, /*together=*/true);
  EXPECT_TRUE(rank0.Shutdown().ok());
  t.join();
  EXPECT_TRUE(worker.ok()) << worker.ToString();
}

TEST(DsparkTest, GreedyWithDsparkIsGreedyWithout) {
  auto plain_rank = Load(kFixture);
  ASSERT_NE(plain_rank, nullptr);
  EXPECT_FALSE(plain_rank->runner->has_draft_model()) << "loaded only when asked";
  const RunResult plain = Generate(plain_rank->runner.get(), Options(0, false), nullptr);
  auto rank = Load(kFixture, nullptr, WithDraft());
  ASSERT_NE(rank, nullptr);
  const RunResult spec = Generate(rank->runner.get(), DsparkOptions(4, 16), nullptr);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_drafts, 0u);
  EXPECT_GT(spec.stats.prefix_hits, 0u);
}

// The dspark fixture's draft tensors, each passed through `edit` (which may rename or drop it
// by clearing the name), plus `extra`, loaded by the draft loader alone.
Status LoadEditedDraft(const std::string& tag, const std::function<void(testing::RawTensor&)>& edit,
                       std::vector<testing::RawTensor> extra = {}) {
  const std::string fixture = fixture_testing::FixtureDir(kFixture);
  auto config = LoadModelConfig(fixture);
  EXPECT_TRUE(config.ok());
  auto source = dsv4::TensorSource::Open(fixture);
  EXPECT_TRUE(source.ok());
  std::vector<testing::RawTensor> tensors;
  for (const auto& [name, t] : (*source)->tensors()) {
    if (!name.starts_with("mtp.")) continue;
    testing::RawTensor copy{name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}};
    edit(copy);
    if (!copy.name.empty()) tensors.push_back(std::move(copy));
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("spark_dspark_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  testing::WriteSafetensors((dir / "model.safetensors").string(), tensors);
  auto edited = dsv4::TensorSource::Open(dir.string());
  EXPECT_TRUE(edited.ok()) << edited.status().message();
  const Status status = dsv41::LoadDraftWeights(**edited, *config, {}).status();
  std::filesystem::remove_all(dir);
  return status;
}

// Every mtp.* tensor is accounted for: a missing one and an unexpected one are named; a vision
// checkpoint's image-token router bias is accepted with its shape checked.
TEST(DsparkTest, TheDraftLoaderNamesWhatIsWrong) {
  EXPECT_TRUE(LoadEditedDraft("ok", [](testing::RawTensor&) {}).ok());
  const std::vector<float> eight(8, 0.5f);
  EXPECT_TRUE(LoadEditedDraft("bias_vl", [](testing::RawTensor&) {},
                              {{"mtp.1.ffn.gate.bias_vl", "F32", {8}, testing::F32Bytes(eight)}})
                  .ok());
  Status s = LoadEditedDraft("bias_vl_shape", [](testing::RawTensor&) {},
                             {{"mtp.1.ffn.gate.bias_vl", "F32", {4},
                               testing::F32Bytes({0, 0, 0, 0})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("mtp.1.ffn.gate.bias_vl"), std::string::npos) << s.message();
  s = LoadEditedDraft("missing", [](testing::RawTensor& t) {
    if (t.name == "mtp.2.markov_head.head.weight") t.name.clear();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("'mtp.2.markov_head.head.weight' is missing"), std::string::npos)
      << s.message();
  s = LoadEditedDraft("extra", [](testing::RawTensor&) {},
                      {{"mtp.1.attn.wq_c.weight", "F32", {1}, testing::F32Bytes({0})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("mtp.1.attn.wq_c.weight"), std::string::npos) << s.message();
}

runtime::StepPlan DraftPlan(std::vector<std::vector<int32_t>> tables, int count) {
  runtime::StepPlan plan;
  plan.command = runtime::StepCommand::kDraft;
  for (size_t k = 0; k < tables.size(); ++k) {
    runtime::StepPlanEntry& e = plan.entries.emplace_back();
    e.seq_id = k;
    e.token_ids = {5};
    e.start_pos = 2;
    e.block_table = std::move(tables[k]);
    e.num_draft_tokens = count;
  }
  return plan;
}

TEST(DsparkTest, TheDraftNeedsItsBlocksAndAStack) {
  auto rank = Load(kFixture, nullptr, WithDraft());
  ASSERT_NE(rank, nullptr);
  // A block table too short for the block is refused, not read past, also when it is not the
  // first block of the plan.
  auto r = rank->runner->DraftTokens(DraftPlan({{0, 1}, {2}}, 4));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  // Blocks of different sizes share no attention window: refused.
  runtime::StepPlan mixed = DraftPlan({{0, 1}, {2, 3}}, 4);
  mixed.entries[1].num_draft_tokens = 3;
  r = rank->runner->DraftTokens(mixed);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  // Only a draft plan drafts.
  runtime::StepPlan run = DraftPlan({{0, 1}}, 4);
  run.command = runtime::StepCommand::kRun;
  EXPECT_EQ(rank->runner->DraftTokens(run).status().code(), StatusCode::kInvalidArgument);
  // Without load_draft the model has none.
  auto plain = Load(kFixture);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->runner->DraftTokens(DraftPlan({{0, 1}}, 4)).status().code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace spark::engine::model
