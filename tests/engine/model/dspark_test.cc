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
#include <functional>
#include <thread>

#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v41/dspark_weights.h"
#include "engine/model/model_family.h"
#include "engine/runtime/plan_broadcast.h"
#include "tests/engine/core/safetensors_writer.h"
#include "tests/engine/model/dspark_test_util.h"
#include "tests/engine/model/speculative_test_util.h"

namespace spark::engine::model {
namespace {

using namespace speculative_testing;
using fixture_testing::Load;

using dspark_testing::DsparkOptions;
using dspark_testing::ExpectReferenceDrafts;
using dspark_testing::kFixture;
using dspark_testing::WithDraft;

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
