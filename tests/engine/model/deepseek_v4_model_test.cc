// Compares the DeepSeek-V4 forward with Hugging Face transformers on the committed tiny fixture
// (tests/fixtures/models/deepseek-v4-tiny, made by scripts/fixtures/make_deepseek_v4_fixture.py:
// sliding, HCA and two CSA layers, a hash-routed layer, mHC, YaRN, sinks, SwiGLU clamp).
// Tolerance: max|ours - ref| / max|ref| < 1e-4 over all rows (fp32 both sides). The fixture's
// seed was chosen so that no indexer top-k boundary is tied, so selections are unambiguous.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"

namespace spark::engine::model {
namespace {

constexpr double kMaxRelError = 1e-4;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<std::vector<float>> logits;  // [prompt length][vocab]
  std::vector<int32_t> greedy;
  std::vector<std::vector<float>> greedy_logits;  // [new tokens][vocab]
};

std::string FixtureDir() {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/deepseek-v4-tiny";
}

std::vector<Case> LoadCases(const std::string& dir) {
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : j["cases"]) {
    cases.push_back({c["prompt_ids"].get<std::vector<int32_t>>(),
                     c["logits"].get<std::vector<std::vector<float>>>(),
                     c["greedy_ids"].get<std::vector<int32_t>>(),
                     c["greedy_logits"].get<std::vector<std::vector<float>>>()});
  }
  return cases;
}

// max|ours - ref| / max|ref| for ref rows [first, first + rows) against ours [rows, vocab].
double RelError(const std::vector<float>& ours, const std::vector<std::vector<float>>& ref,
                size_t first, size_t rows) {
  double max_diff = 0, max_ref = 0;
  for (size_t r = 0; r < rows; ++r) {
    const std::vector<float>& row = ref[first + r];
    for (size_t v = 0; v < row.size(); ++v) {
      max_ref = std::max(max_ref, std::fabs(double{row[v]}));
      max_diff = std::max(max_diff, std::fabs(double{ours[r * row.size() + v]} - row[v]));
    }
  }
  return max_diff / max_ref;
}

int32_t Argmax(const float* row, int vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// A model with its cache; block ids handed out scrambled so the paged layout is exercised.
struct Engine {
  backend::cpu::CpuBackend backend{2};
  std::unique_ptr<Model> model;
  std::unique_ptr<PagedKvCache> cache;
  int next_block = 0;
  static constexpr int kBlockSize = 4;
  static constexpr int kBlocks = 64;

  explicit Engine(const std::string& dir) {
    auto m = LoadModel(dir, backend, nullptr, {});
    EXPECT_TRUE(m.ok()) << m.status().message();
    if (!m.ok()) return;
    model = std::move(*m);
    auto c = PagedKvCache::Create(backend, model->kv_cache_spec(), kBlocks, kBlockSize);
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (c.ok()) cache = std::make_unique<PagedKvCache>(std::move(*c));
  }
  std::vector<int32_t> Blocks(int count) {
    std::vector<int32_t> ids;
    for (int i = 0; i < count; ++i) ids.push_back((next_block++ * 37) % kBlocks);
    return ids;
  }
  // Runs `tokens` of one sequence that already has `cached` tokens; all logits.
  std::vector<float> Run(std::span<const int32_t> tokens, int64_t cached,
                         const std::vector<int32_t>& table, bool all_logits = true) {
    ForwardBatch batch;
    batch.all_logits = all_logits;
    batch.AddSequence(tokens, cached, table, kBlockSize);
    std::vector<float> logits;
    const Status s = model->Forward(batch, *cache, &logits);
    EXPECT_TRUE(s.ok()) << s.message();
    return logits;
  }
};

class DeepseekV4ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cases_ = LoadCases(FixtureDir());
    ASSERT_EQ(cases_.size(), 2u);
    engine_ = std::make_unique<Engine>(FixtureDir());
    ASSERT_NE(engine_->model, nullptr);
    ASSERT_NE(engine_->cache, nullptr);
    vocab_ = engine_->model->config().vocab_size;
  }
  std::vector<Case> cases_;
  std::unique_ptr<Engine> engine_;
  int vocab_ = 0;
};

// Both prompts in one batch (continuous batching): every row of the logits must match.
TEST_F(DeepseekV4ModelTest, OneShotPrefillMatchesTransformers) {
  ForwardBatch batch;
  batch.all_logits = true;
  std::vector<std::vector<int32_t>> tables;
  for (const Case& c : cases_) {
    tables.push_back(engine_->Blocks(16));
    batch.AddSequence(c.prompt, 0, tables.back(), Engine::kBlockSize);
  }
  std::vector<float> logits;
  const Status s = engine_->model->Forward(batch, *engine_->cache, &logits);
  ASSERT_TRUE(s.ok()) << s.message();
  size_t row = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const size_t len = cases_[i].prompt.size();
    const std::vector<float> mine(logits.begin() + row * vocab_,
                                  logits.begin() + (row + len) * vocab_);
    const double err = RelError(mine, cases_[i].logits, 0, len);
    EXPECT_LT(err, kMaxRelError) << "case " << i;
    std::printf("case %zu (%zu tokens): max relative logit error %.3g\n", i, len, err);
    row += len;
  }
}

// Prefill, then greedy decode token by token across window and compression boundaries: the
// tokens and each step's logits must match transformers' generate.
TEST_F(DeepseekV4ModelTest, GreedyDecodeMatchesTransformersGenerate) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    const Case& c = cases_[i];
    const std::vector<int32_t> table = engine_->Blocks(16);
    std::vector<float> logits = engine_->Run(c.prompt, 0, table, /*all_logits=*/false);
    std::vector<int32_t> generated;
    double worst = 0;
    for (size_t step = 0; step < c.greedy.size(); ++step) {
      worst = std::max(worst, RelError(logits, c.greedy_logits, step, 1));
      generated.push_back(Argmax(logits.data(), vocab_));
      if (step + 1 == c.greedy.size()) break;
      logits = engine_->Run(std::span(&generated.back(), 1),
                            static_cast<int64_t>(c.prompt.size() + step), table);
    }
    EXPECT_EQ(generated, c.greedy) << "case " << i;
    EXPECT_LT(worst, kMaxRelError) << "case " << i;
    std::printf("case %zu: %zu greedy tokens, max relative logit error %.3g\n", i, generated.size(),
                worst);
  }
}

// Chunked prefill with chunks that start and end off the CSA (4) and HCA (8) grids and the
// window (8), then the rest one token at a time: each chunk's logits match the one-shot rows.
TEST_F(DeepseekV4ModelTest, ChunkedAndTokenByTokenPrefillMatchOneShot) {
  const Case& c = cases_[0];
  const std::vector<int32_t> table = engine_->Blocks(16);
  const std::vector<size_t> chunks = {3, 6, 1, 11, 9, 5};  // ends at 3, 9, 10, 21, 30, 35
  size_t done = 0;
  for (size_t len : chunks) {
    const std::vector<float> logits =
        engine_->Run(std::span(c.prompt).subspan(done, len), static_cast<int64_t>(done), table);
    EXPECT_LT(RelError(logits, c.logits, done, len), kMaxRelError) << "chunk at " << done;
    done += len;
  }
  for (; done < c.prompt.size(); ++done) {
    const std::vector<float> logits =
        engine_->Run(std::span(c.prompt).subspan(done, 1), static_cast<int64_t>(done), table);
    EXPECT_LT(RelError(logits, c.logits, done, 1), kMaxRelError) << "token " << done;
  }
}

// Prefix caching: a second sequence that shares the first blocks of a finished one (as the block
// manager's prefix cache hands them out) and computes only the rest must see the same logits —
// the window, pending-token projections, compressed entries and indexer keys of the prefix are
// all in those blocks. The shared prefix (13 tokens) ends off every grid.
TEST_F(DeepseekV4ModelTest, SharedPrefixBlocksRestoreTheCompressorState) {
  const Case& c = cases_[0];
  const std::vector<int32_t> first = engine_->Blocks(16);
  engine_->Run(std::span(c.prompt).first(13), 0, first);
  std::vector<int32_t> second = engine_->Blocks(16);
  std::copy_n(first.begin(), 3, second.begin());  // blocks of tokens 0..11
  // Token 12 lives in block 3, which the prefix cache would not share (it is partial): recompute.
  const std::vector<float> logits = engine_->Run(std::span(c.prompt).subspan(12), 12, second);
  EXPECT_LT(RelError(logits, c.logits, 12, c.prompt.size() - 12), kMaxRelError);
}

TEST_F(DeepseekV4ModelTest, RejectsBadBatches) {
  ForwardBatch bad_token;
  const std::vector<int32_t> ids = {1, 100000};
  bad_token.AddSequence(ids, 0, {0}, Engine::kBlockSize);
  std::vector<float> logits;
  EXPECT_EQ(engine_->model->Forward(bad_token, *engine_->cache, &logits).code(),
            StatusCode::kInvalidArgument);
}

// The same model in the released layout (FP8 E4M3 + UE8M0 32x32 block scales, packed FP4 experts
// with E8M0 1x32 scales, BF16 elsewhere, no "model." prefix), quantised by the fixture script:
// the logits must match transformers run on exactly the dequantised weights.
TEST(DeepseekV4LoadTest, Fp8Fp4CheckpointMatchesTransformersOnDequantisedWeights) {
  const std::string dir = FixtureDir() + "/fp8";
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const auto prompt = j["cases"][0]["prompt_ids"].get<std::vector<int32_t>>();
  const auto ref = j["cases"][0]["logits"].get<std::vector<std::vector<float>>>();
  Engine e(dir);
  ASSERT_NE(e.model, nullptr);
  const std::vector<float> logits = e.Run(prompt, 0, e.Blocks(16));
  const double err = RelError(logits, ref, 0, prompt.size());
  EXPECT_LT(err, kMaxRelError);
  std::printf("fp8/fp4 checkpoint (%zu tokens): max relative logit error %.3g\n", prompt.size(),
              err);
  // And the quantisation is real: the fp32 fixture's logits are far from these.
  Engine fp32(FixtureDir());
  ASSERT_NE(fp32.model, nullptr);
  const std::vector<float> unquantised = fp32.Run(prompt, 0, fp32.Blocks(16));
  EXPECT_GT(RelError(unquantised, ref, 0, prompt.size()), 1e-3);
}

// Tensor parallelism in one process: each thread is a rank holding its heads, output-group
// blocks, experts (or expert channels), shared-expert channels and vocabulary rows. Every rank
// must reproduce transformers' one-shot logits and greedy tokens. TP=4 splits each of the two
// output groups across two ranks.
void RunTensorParallel(int tp, MoeSharding moe) {
  const std::vector<Case> cases = LoadCases(FixtureDir());
  auto group = comm::CreateLocalGroup(tp);
  std::vector<std::thread> ranks;
  std::vector<double> worst(tp, 1.0);
  std::vector<std::vector<int32_t>> tokens(tp);
  for (int r = 0; r < tp; ++r) {
    ranks.emplace_back([&, r] {
      backend::cpu::CpuBackend backend(1);
      auto model = LoadModel(FixtureDir(), backend, group[r].get(), {{r, tp}, moe});
      ASSERT_TRUE(model.ok()) << model.status().message();
      auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), 32, 4);
      ASSERT_TRUE(cache.ok());
      const Case& c = cases[0];
      std::vector<int32_t> table(16);
      for (int i = 0; i < 16; ++i) table[i] = (i * 7) % 32;
      ForwardBatch prefill;
      prefill.all_logits = true;
      prefill.AddSequence(c.prompt, 0, table, 4);
      std::vector<float> logits;
      ASSERT_TRUE((*model)->Forward(prefill, *cache, &logits).ok());
      worst[r] = RelError(logits, c.logits, 0, c.prompt.size());
      const int vocab = (*model)->config().vocab_size;
      tokens[r].push_back(Argmax(&logits[(c.prompt.size() - 1) * vocab], vocab));
      for (size_t step = 1; step < c.greedy.size(); ++step) {
        ForwardBatch decode;
        decode.AddSequence(std::span(&tokens[r].back(), 1),
                           static_cast<int64_t>(c.prompt.size() + step - 1), table, 4);
        ASSERT_TRUE((*model)->Forward(decode, *cache, &logits).ok());
        tokens[r].push_back(Argmax(logits.data(), vocab));
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < tp; ++r) {
    EXPECT_LT(worst[r], kMaxRelError) << "rank " << r << " of " << tp;
    EXPECT_EQ(tokens[r], cases[0].greedy) << "rank " << r << " of " << tp;
  }
  std::printf("TP=%d: max relative logit error %.3g\n", tp,
              *std::max_element(worst.begin(), worst.end()));
}

TEST(DeepseekV4TensorParallelTest, TwoRanksByExpert) {
  RunTensorParallel(2, MoeSharding::kByExpert);
}

TEST(DeepseekV4TensorParallelTest, TwoRanksInsideExperts) {
  RunTensorParallel(2, MoeSharding::kInsideExperts);
}

TEST(DeepseekV4TensorParallelTest, FourRanksSplitGroupsAndExpertChannels) {
  RunTensorParallel(4, MoeSharding::kInsideExperts);
}

// Its attention addresses fp32 cache fields itself: a bf16 KV cache is refused at load.
TEST(DeepseekV4LoadTest, RefusesABf16KvCache) {
  backend::cpu::CpuBackend backend(1);
  ModelOptions options;
  options.kv_dtype = backend::DType::kBF16;
  auto model = LoadModel(FixtureDir(), backend, nullptr, options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("fp32 KV cache only (bf16 asked)"), std::string::npos)
      << model.status().message();
}

TEST(DeepseekV4LoadTest, ReportsLoadingProgress) {
  backend::cpu::CpuBackend backend(1);
  ModelOptions options;
  std::vector<double> seen;
  options.on_progress = [&](double f) { seen.push_back(f); };
  auto model = LoadModel(FixtureDir(), backend, nullptr, options);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_GT(seen.size(), 10u);
  EXPECT_EQ(seen.front(), 0.0);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_LE(seen.back(), 0.999);
  EXPECT_GT(seen.back(), 0.99) << "one rank consumes every tensor of the checkpoint";
}

TEST(DeepseekV4TensorParallelTest, NamesTheKeyAWorldSizeDoesNotDivide) {
  backend::cpu::CpuBackend backend(1);
  auto group = comm::CreateLocalGroup(4);
  // 6 experts cannot be split by expert over 4 ranks.
  auto model = LoadModel(FixtureDir(), backend, group[0].get(), {{0, 4}, MoeSharding::kByExpert});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("n_routed_experts"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace spark::engine::model
