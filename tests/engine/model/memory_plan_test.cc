// The memory plan against what the engine allocates: each family row's step_memory equals the
// peak of the CPU backend's live bytes during a real forward (weights and KV cache included), and
// the plan's node arithmetic (fit, knobs, the KV budget from a fraction) on fixed numbers.
#include "engine/model/memory_plan.h"

#include <gtest/gtest.h>

#include <thread>

#include "comm/local_communicator.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"

namespace spark::engine::model {
namespace {

using backend::DType;

std::string FixtureDir(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

struct StepCase {
  std::string fixture;
  int tp;
  MoeSharding moe;
  // The DSpark stack too: each sequence drafts a block before the forward, so the draft's kept
  // buffers are live during it.
  bool draft = false;
};

class StepMemoryTest : public testing::TestWithParam<StepCase> {};

// Two prompts of 9 and 14 tokens in one prefill step: the peak of rank 0's live backend bytes
// over loading, the cache and the forward (after a draft block per sequence, with the DSpark
// stack) is the row's weights + KV cache + step_memory.
TEST_P(StepMemoryTest, RowEqualsThePeakOfAForward) {
  const StepCase& c = GetParam();
  auto config = LoadModelConfig(FixtureDir(c.fixture));
  ASSERT_TRUE(config.ok()) << config.status().message();
  const ModelFamily* family = FindModelFamily(config->model_type);
  ASSERT_NE(family, nullptr);
  const int kBlocks = 16, kBlockSize = 16;
  const std::vector<int> lengths = {9, 14};
  auto group = comm::CreateLocalGroup(c.tp);
  std::vector<size_t> before(c.tp), peak(c.tp);
  std::vector<int64_t> kv_bytes(c.tp);
  std::vector<Status> results(c.tp);
  auto run_rank = [&](int rank) {
    backend::cpu::CpuBackend backend(1);
    ModelOptions options;
    options.shard = {rank, c.tp};
    options.moe_sharding = c.moe;
    options.tokenizer_dir = FixtureDir(c.fixture);
    options.load_draft = c.draft;
    before[rank] = backend.bytes_in_use();
    auto model =
        LoadModel(FixtureDir(c.fixture), backend, c.tp > 1 ? group[rank].get() : nullptr, options);
    if (!model.ok()) {
      results[rank] = model.status();
      return;
    }
    auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), kBlocks, kBlockSize);
    if (!cache.ok()) {
      results[rank] = cache.status();
      return;
    }
    kv_bytes[rank] = int64_t{kBlocks} * kBlockSize * (*model)->kv_cache_spec().bytes_per_token();
    ForwardBatch batch;
    int block = 0;
    for (int len : lengths) {
      std::vector<int32_t> tokens(len);
      for (int i = 0; i < len; ++i) tokens[i] = (i * 7 + len) % 50;
      batch.AddSequence(tokens, 0, {block, block + 1}, kBlockSize);
      block += 2;
    }
    if (c.draft) {
      std::vector<DraftBlock> blocks;
      for (size_t k = 0; k < lengths.size(); ++k) {
        const std::span<const int32_t> table = batch.sequences[k].block_table;
        blocks.push_back({7, lengths[k], table, config->dsv41.dspark_block_size});
      }
      std::vector<std::vector<int32_t>> drafts;
      results[rank] = (*model)->DraftTokens(blocks, *cache, &drafts);
      if (!results[rank].ok()) return;
    }
    std::vector<float> logits;
    results[rank] = (*model)->Forward(batch, *cache, &logits);
    peak[rank] = backend.peak_bytes_in_use();
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < c.tp; ++r) threads.emplace_back(run_rank, r);
  run_rank(0);
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.message();

  const MemoryQuery query{{0, c.tp}, c.moe, DType::kF32, DType::kF32, c.draft};
  auto memory = family->memory(*config, query);
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  StepShape shape{/*tokens=*/23, /*logit_rows=*/2, /*context=*/14};
  shape.draft_blocks = c.draft ? 2 : 0;
  shape.draft_block_tokens = config->dsv41.dspark_block_size;  // the blocks drafted above
  auto step = family->step_memory(*config, query, shape);
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_EQ(static_cast<int64_t>(peak[0] - before[0]), memory->weight_bytes + kv_bytes[0] + *step);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, StepMemoryTest,
    testing::Values(StepCase{"qwen3-tiny", 1, MoeSharding::kInsideExperts},
                    StepCase{"qwen3-tiny", 2, MoeSharding::kInsideExperts},
                    StepCase{"qwen3-moe-tiny", 2, MoeSharding::kByExpert},
                    StepCase{"deepseek-v4-tiny", 1, MoeSharding::kByExpert},
                    StepCase{"deepseek-v4-tiny", 2, MoeSharding::kInsideExperts},
                    StepCase{"deepseek-v41-tiny", 1, MoeSharding::kByExpert},
                    StepCase{"deepseek-v41-tiny", 2, MoeSharding::kInsideExperts},
                    StepCase{"deepseek-v41-tiny/dspark", 1, MoeSharding::kByExpert, true},
                    StepCase{"deepseek-v41-tiny/dspark", 2, MoeSharding::kInsideExperts, true}));

// A rank of fixed numbers, so the node arithmetic can be checked by hand.
RankPlan HandRank() {
  RankPlan r;
  r.fixed = {{"weights", 60 * kGiB, ""}, {"activations", 2 * kGiB, ""}};
  r.fixed_bytes = 62 * kGiB;
  r.kv_bytes_per_token = 64 * 1024;  // 64 KiB a token: 16384 tokens a GiB
  r.kv_bytes_per_sequence = 0;
  r.kv_tokens = 16384 * 40;  // 40 GiB
  r.kv_bytes = 40 * kGiB;
  r.max_position_embeddings = 1 << 20;
  return r;
}

TEST(MemoryPlanTest, NodeFitsWhenTheFloorStays) {
  PlanRequest req;
  req.max_num_seqs = 4;
  req.max_model_len = 32768;
  const NodeFit fit = FitNode(HandRank(), req, "spark-0", 110 * kGiB);
  EXPECT_TRUE(fit.ok) << fit.message;
  EXPECT_EQ(fit.headroom_bytes, 8 * kGiB);
  EXPECT_EQ(fit.knob, Knob::kNone);
  // 110 - 5 floor - 62 = 43 GiB of KV room: 43 x 16384 tokens over 4 sequences.
  EXPECT_EQ(fit.max_context, 43 * 16384 / 4);
  EXPECT_EQ(fit.max_concurrency, 43 * 16384 / 32768);
}

TEST(MemoryPlanTest, KvThatEatsTheFloorNamesTheLargestBudgetThatFits) {
  PlanRequest req;
  const NodeFit fit = FitNode(HandRank(), req, "spark-1", 104 * kGiB);
  EXPECT_FALSE(fit.ok);
  EXPECT_EQ(fit.headroom_bytes, 2 * kGiB);
  EXPECT_EQ(fit.knob, Knob::kKvTokens);
  EXPECT_EQ(fit.knob_value, 37 * 16384);  // 104 - 5 - 62 GiB
  EXPECT_NE(fit.message.find("node spark-1: 2 GiB would stay available, below the 5 GiB floor"),
            std::string::npos)
      << fit.message;
  EXPECT_NE(fit.message.find("--num-kv-blocks 37888"), std::string::npos) << fit.message;
}

TEST(MemoryPlanTest, WeightsThatLeaveNoRoomAskForMoreRanks) {
  PlanRequest req;
  req.tp = 2;
  const NodeFit fit = FitNode(HandRank(), req, "spark-0", 64 * kGiB);
  EXPECT_FALSE(fit.ok);
  EXPECT_EQ(fit.knob, Knob::kTp);
  EXPECT_EQ(fit.knob_value, 4);
  EXPECT_NE(fit.message.find("--tp 4"), std::string::npos) << fit.message;
}

TEST(MemoryPlanTest, FractionTakesItsShareOfWhatIsLeft) {
  PlanRequest req;
  req.kv_memory_fraction = 0.5;
  RankPlan rank = HandRank();
  rank.kv_tokens = rank.kv_bytes = 0;
  const NodeFit fit = FitNode(rank, req, "spark-0", 102 * kGiB);
  EXPECT_EQ(fit.kv_bytes, 20 * kGiB);  // half of 102 - 62
  EXPECT_TRUE(fit.ok);
  const NodeFit tight = FitNode(rank, req, "spark-0", 70 * kGiB);
  EXPECT_FALSE(tight.ok);  // 4 GiB of KV from 8 leaves 4 < 5
  EXPECT_EQ(tight.knob, Knob::kKvFraction);
  EXPECT_DOUBLE_EQ(tight.knob_fraction, 0.37);  // (70 - 5 - 62) / 8
}

TEST(MemoryPlanTest, TwoRanksOnANodeShareIt) {
  PlanRequest req;
  const NodeFit fit = FitNode(HandRank(), req, "h200", 240 * kGiB, 2);
  EXPECT_EQ(fit.used_bytes, 2 * 102 * kGiB);
  EXPECT_TRUE(fit.ok);
}

TEST(MemoryPlanTest, FloorsMustBeOrdered) {
  EXPECT_TRUE(MemoryFloors{}.Validate().ok());
  EXPECT_FALSE(
      (MemoryFloors{.startup = 2 * kGiB, .admit = 3 * kGiB, .hard = kGiB}).Validate().ok());
}

// The plan of a real row: Qwen3 on cuda at TP=2 counts NCCL's default buffers, the graph arena
// and the CUDA runtime; the KV default is serve's.
TEST(MemoryPlanTest, CudaPlanCountsTransportAndGraphs) {
  auto config = LoadModelConfig(FixtureDir("qwen3-tiny"));
  ASSERT_TRUE(config.ok());
  PlanRequest req;
  req.tp = 2;
  req.max_num_seqs = 8;
  req.max_model_len = 256;
  auto plan = PlanRank(*config, *FindModelFamily("qwen3"), req);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::vector<std::string> names;
  for (const PlanItem& i : plan->fixed) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"weights", "activations", "cuda graph arena",
                                             "nccl buffers", "cuda runtime", "engine process"}));
  EXPECT_EQ(plan->fixed[3].bytes, static_cast<int64_t>(4.7 * kGiB));
  EXPECT_EQ(plan->kv_tokens, DefaultKvBlocks(8, 256, 16) * 16);
  req.nccl_buffsize = "1048576";
  req.nccl_proto = "^LL128";
  req.nccl_max_nchannels = "8";
  auto tuned = PlanRank(*config, *FindModelFamily("qwen3"), req);
  ASSERT_TRUE(tuned.ok());
  EXPECT_EQ(tuned->fixed[3].bytes, static_cast<int64_t>(0.14 * kGiB));
}

// DeepSeek runs on cuda: its plan holds the released weight types (fp8), not a projection.
TEST(MemoryPlanTest, DeepseekOnCudaHoldsTheReleasedTypes) {
  auto config = LoadModelConfig(FixtureDir("deepseek-v41-tiny"));
  ASSERT_TRUE(config.ok());
  PlanRequest req;
  req.weight_dtype = DType::kFP8;
  req.kv_dtype = DType::kF32;
  auto fp8 = PlanRank(*config, *FindModelFamily("deepseek_v41"), req);
  ASSERT_TRUE(fp8.ok()) << fp8.status().message();
  EXPECT_FALSE(fp8->serving_layout);
  req.weight_dtype = DType::kF32;
  auto fp32 = PlanRank(*config, *FindModelFamily("deepseek_v41"), req);
  ASSERT_TRUE(fp32.ok()) << fp32.status().message();
  auto weights = [](const RankPlan& p) {
    for (const PlanItem& i : p.fixed) {
      if (i.name == "weights") return i.bytes;
    }
    return int64_t{0};
  };
  EXPECT_GT(weights(*fp8), 0);
  EXPECT_LT(weights(*fp8) * 3, weights(*fp32)) << "FP8 / FP4 against fp32";
}

// Logits rows a step brings back: a row per running sequence, per verified draft token and per
// scored prompt token (max_scored_tokens a step with chunked prefill, a whole step without),
// never more than the step's tokens.
TEST(MemoryPlanTest, LogitsRowsCountDraftsAndScoredPromptTokens) {
  auto config = LoadModelConfig(FixtureDir("qwen3-tiny"));
  ASSERT_TRUE(config.ok());
  auto activations = [&](int max_batched_tokens, int drafts, bool chunked) {
    PlanRequest req;
    req.backend = "cpu";
    req.weight_dtype = DType::kF32;
    req.kv_dtype = DType::kF32;
    req.max_num_seqs = 8;
    req.max_model_len = 256;
    req.max_batched_tokens = max_batched_tokens;
    req.speculative_tokens = drafts;
    req.chunked_prefill = chunked;
    auto plan = PlanRank(*config, *FindModelFamily("qwen3"), req);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    for (const PlanItem& i : plan->fixed) {
      if (i.name == "activations") return i.bytes;
    }
    return int64_t{0};
  };
  const int64_t row = int64_t{4} * config->vocab_size;
  // 8 + 512 rows, then 8 x 5 + 512.
  EXPECT_GE(activations(2048, 4, true) - activations(2048, 0, true), 8 * 4 * row);
  // Without chunked prefill a scored prompt may fill the step: 2048 rows, not 520.
  EXPECT_GE(activations(2048, 0, false) - activations(2048, 0, true), (2048 - 520) * row);
  // A step of 16 tokens brings back at most 16 rows, drafts or not.
  EXPECT_EQ(activations(16, 4, true), activations(16, 0, true));
}

}  // namespace
}  // namespace spark::engine::model
