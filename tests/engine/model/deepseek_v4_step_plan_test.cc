// The step's integer inputs of the DeepSeek ops (entries closed, slots pooled, candidates per
// query) for a batch worked out by hand; the model's refusal of a backend without DeepseekOps and
// of positions that disagree with their sequence.
#include <gtest/gtest.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/deepseek_v4/step_plan.h"
#include "engine/model/model.h"

namespace spark::engine::model::dsv4 {
namespace {

// Sequence A has 6 tokens cached and appends 5 (positions 6..10) over blocks {3, 0, 7};
// sequence B is new with 4 tokens over block {5}. Block size 4; CSA ratio 4, HCA ratio 8.
ForwardBatch Batch() {
  ForwardBatch b;
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, c = {6, 7, 8, 9};
  b.AddSequence(a, 6, {3, 0, 7}, 4);
  b.AddSequence(c, 0, {5}, 4);
  return b;
}

core::DeepseekV4Settings Ratios() {
  core::DeepseekV4Settings d;
  d.compress_rate_csa = 4;
  d.compress_rate_hca = 8;
  return d;
}

TEST(DeepseekV4StepPlanTest, CsaEntriesPoolTheOverlappingWindows) {
  const StepPlan plan = PlanStep(Batch(), 4, Ratios());
  const Compression& c = plan.csa.compression;
  EXPECT_EQ(c.pool, 8);
  // A's position 7 closes window 1 (window 0 at slots 12..15, window 1 at 0..3); B's position 3
  // closes window 0, whose previous half is missing.
  EXPECT_EQ(c.source_slots, (std::vector<int64_t>{12, 13, 14, 15, 0, 1, 2, 3,  //
                                                  -1, -1, -1, -1, 20, 21, 22, 23}));
  EXPECT_EQ(c.entry_slots, (std::vector<int64_t>{3, 23}));
  EXPECT_EQ(c.entry_positions, (std::vector<int32_t>{4, 0}));
  const Candidates& k = plan.csa.candidates;
  EXPECT_EQ(k.slots, (std::vector<int64_t>{15, 3, 23}));
  EXPECT_EQ(k.first, (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 2, 2, 2}));
  EXPECT_EQ(k.count, (std::vector<int32_t>{1, 2, 2, 2, 2, 0, 0, 0, 1}));
}

TEST(DeepseekV4StepPlanTest, HcaEntriesPoolOneWindow) {
  const StepPlan plan = PlanStep(Batch(), 4, Ratios());
  const Compression& c = plan.hca.compression;
  EXPECT_EQ(c.pool, 8);
  EXPECT_EQ(c.source_slots, (std::vector<int64_t>{12, 13, 14, 15, 0, 1, 2, 3}));
  EXPECT_EQ(c.entry_slots, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.entry_positions, (std::vector<int32_t>{0}));
  EXPECT_EQ(plan.hca.candidates.slots, (std::vector<int64_t>{3}));
  EXPECT_EQ(plan.hca.candidates.count, (std::vector<int32_t>{0, 1, 1, 1, 1, 0, 0, 0, 0}));
  ASSERT_EQ(plan.sequences.size(), 2u);
  EXPECT_EQ(plan.sequences[1].query_start, 5);
  EXPECT_EQ(plan.sequences[1].context_len, 4);
}

std::string Fixture() {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/deepseek-v4-tiny";
}

// The attention op places a query by its sequence's context_len, RoPE by its position.
TEST(DeepseekV4BatchTest, RejectsAPositionOffItsSequence) {
  backend::cpu::CpuBackend backend(1);
  auto model = LoadModel(Fixture(), backend, nullptr, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), 4, 4);
  ASSERT_TRUE(cache.ok());
  ForwardBatch batch;
  const std::vector<int32_t> ids = {1, 2};
  batch.AddSequence(ids, 0, {0}, 4);
  batch.positions[1] = 5;
  std::vector<float> logits;
  const Status s = (*model)->Forward(batch, *cache, &logits);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token 1 has position 5"), std::string::npos) << s.message();
}

// A CPU backend that offers no DeepSeek ops (as a device backend without them would).
class PlainBackend : public backend::cpu::CpuBackend {
 public:
  PlainBackend() : CpuBackend(1) {}
  backend::DeepseekOps* deepseek_ops() override { return nullptr; }
};

// Refused at load, before any weight is read.
TEST(DeepseekV4BackendTest, RefusesABackendWithoutDeepseekOps) {
  PlainBackend backend;
  auto model = LoadModel(Fixture(), backend, nullptr, {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("has no DeepSeek ops"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace spark::engine::model::dsv4
