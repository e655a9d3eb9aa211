// Helpers for the CUDA model tests: the fixture's transformers cases, and one rank's prefill of
// every prompt plus batched greedy decode, as the engine runs them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "kernels/cuda_check.h"

namespace spark::engine::model::testing {

constexpr double kMaxRelError = 1e-4;
constexpr int kBlockSize = 4, kBlocks = 64, kBlocksPerSeq = 12;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

inline std::vector<Case> LoadCases(const std::string& dir, int* eos) {
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  *eos = j["eos_token_id"].get<int>();
  std::vector<Case> cases;
  for (const auto& c : j["cases"]) {
    cases.push_back({c["prompt_ids"].get<std::vector<int32_t>>(),
                     c["logits"].get<std::vector<std::vector<float>>>(),
                     c["greedy_ids"].get<std::vector<int32_t>>()});
  }
  return cases;
}

inline double RelError(const float* ours, const std::vector<std::vector<float>>& ref) {
  double diff = 0, top = 0;
  for (size_t r = 0; r < ref.size(); ++r)
    for (size_t v = 0; v < ref[r].size(); ++v) {
      top = std::max(top, std::fabs(double{ref[r][v]}));
      diff = std::max(diff, std::fabs(double{ours[r * ref[r].size() + v]} - ref[r][v]));
    }
  return diff / top;
}

// How decode steps pick their tokens: argmax of Forward's logits on the host (default), or
// Model::ForwardArgMax, with before_step(live sequences) run first (e.g. to open a CUDA graph).
struct DecodeOptions {
  bool argmax = false;
  std::function<void(int live)> before_step;
};

struct ModelRun {
  std::vector<float> prefill_logits;         // every prompt token of every case
  std::vector<std::vector<int32_t>> tokens;  // greedy continuation per case
};

// Prefills all prompts in one batch (scrambled block ids), then decodes them together.
inline ModelRun RunModel(const std::string& dir, backend::Backend& backend,
                         const std::vector<Case>& cases, int eos,
                         comm::Communicator* comm = nullptr, const ModelOptions& options = {},
                         const DecodeOptions& decode_options = {}) {
  ModelRun run;
  auto model = LoadModel(dir, backend, comm, options);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return run;
  auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), kBlocks, kBlockSize);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return run;
  const int vocab = (*model)->config().vocab_size;
  std::vector<std::vector<int32_t>> tables;
  ForwardBatch prefill;
  prefill.all_logits = true;
  int next = 0;
  for (const Case& c : cases) {
    tables.emplace_back();
    for (int i = 0; i < kBlocksPerSeq; ++i) tables.back().push_back((next++ * 37) % kBlocks);
    prefill.AddSequence(c.prompt, 0, tables.back(), kBlockSize);
  }
  Status s = (*model)->Forward(prefill, *cache, &run.prefill_logits);
  EXPECT_TRUE(s.ok()) << s.message();
  run.tokens.resize(cases.size());
  size_t row = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    row += cases[i].prompt.size();
    const float* last = &run.prefill_logits[(row - 1) * vocab];
    run.tokens[i].push_back(static_cast<int32_t>(std::max_element(last, last + vocab) - last));
  }
  for (int step = 1; step < 16; ++step) {
    ForwardBatch decode;
    std::vector<size_t> live;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (run.tokens[i].back() == eos || run.tokens[i].size() >= cases[i].greedy.size()) continue;
      live.push_back(i);
      const int64_t cached = cases[i].prompt.size() + run.tokens[i].size() - 1;
      decode.AddSequence(std::span(&run.tokens[i].back(), 1), cached, tables[i], kBlockSize);
    }
    if (live.empty()) break;
    if (decode_options.argmax) {
      if (decode_options.before_step) decode_options.before_step(static_cast<int>(live.size()));
      std::vector<int32_t> ids;
      s = (*model)->ForwardArgMax(decode, *cache, &ids);
      EXPECT_TRUE(s.ok()) << s.message();
      if (!s.ok()) break;
      for (size_t k = 0; k < live.size(); ++k) run.tokens[live[k]].push_back(ids[k]);
      continue;
    }
    std::vector<float> logits;
    s = (*model)->Forward(decode, *cache, &logits);
    EXPECT_TRUE(s.ok()) << s.message();
    for (size_t k = 0; k < live.size(); ++k) {
      const float* l = &logits[k * vocab];
      run.tokens[live[k]].push_back(static_cast<int32_t>(std::max_element(l, l + vocab) - l));
    }
  }
  return run;
}

// Prefills all prompts (ForwardArgMax), then decodes them together with steps launched ahead
// (Model::LaunchArgMax, each step's ids fed to the next where they were computed; two steps in
// flight), for as many tokens as the shortest greedy continuation. before_launch(step) runs
// before each launch (e.g. to open a CUDA graph).
inline std::vector<std::vector<int32_t>> RunLaunched(
    const std::string& dir, backend::Backend& backend, const std::vector<Case>& cases,
    const std::function<void(size_t step)>& before_launch = {}) {
  std::vector<std::vector<int32_t>> tokens(cases.size());
  auto model = LoadModel(dir, backend, nullptr, {});
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return tokens;
  auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), kBlocks, kBlockSize);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return tokens;
  std::vector<std::vector<int32_t>> tables;
  ForwardBatch prefill;
  size_t n = SIZE_MAX;
  int next = 0;
  for (const Case& c : cases) {
    tables.emplace_back();
    for (int i = 0; i < kBlocksPerSeq; ++i) tables.back().push_back((next++ * 37) % kBlocks);
    prefill.AddSequence(c.prompt, 0, tables.back(), kBlockSize);
    n = std::min(n, c.greedy.size());
  }
  std::vector<int32_t> first;
  Status s = (*model)->ForwardArgMax(prefill, *cache, &first);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return tokens;
  for (size_t i = 0; i < cases.size(); ++i) tokens[i].push_back(first[i]);
  auto take = [&] {
    std::vector<int32_t> ids;
    const Status taken = (*model)->TakeArgMax(&ids);
    EXPECT_TRUE(taken.ok()) << taken.message();
    for (size_t i = 0; i < ids.size() && i < cases.size(); ++i) tokens[i].push_back(ids[i]);
  };
  for (size_t step = 1; step < n; ++step) {
    ForwardBatch decode;  // from step 2 on the ids come from the step before, not from here
    for (size_t i = 0; i < cases.size(); ++i) {
      const int64_t cached = static_cast<int64_t>(cases[i].prompt.size() + step - 1);
      decode.AddSequence(std::span(&first[i], 1), cached, tables[i], kBlockSize);
    }
    if (before_launch) before_launch(step);
    s = (*model)->LaunchArgMax(decode, *cache, step > 1);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return tokens;
    if (step > 1) take();
  }
  if (n > 1) take();
  return tokens;
}

// A GPU test over one fixture (the test parameter): skipped where no CUDA device is visible;
// otherwise dir, cases, eos and a CudaBackend on device 0 are ready.
class CudaFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
    dir = std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + GetParam();
    cases = LoadCases(dir, &eos);
    auto created = backend::cuda::CudaBackend::Create({});
    ASSERT_TRUE(created.ok()) << created.status().message();
    gpu = std::move(*created);
  }

  std::string dir;
  int eos = -1;
  std::vector<Case> cases;
  std::unique_ptr<backend::cuda::CudaBackend> gpu;
};

// One rank on GPU 0: what the TP=2 tests compare with.
inline ModelRun RunOneGpu(const std::string& dir, const std::vector<Case>& cases, int eos) {
  auto gpu = backend::cuda::CudaBackend::Create({});
  EXPECT_TRUE(gpu.ok()) << gpu.status().message();
  if (!gpu.ok()) return {};
  return RunModel(dir, **gpu, cases, eos);
}

// Greedy decode through Model::ForwardArgMax over `comm`, each step a CUDA graph (keyed by the
// live sequences) when `graphs`; *captured: how many graphs it captured.
inline ModelRun RunArgMaxDecode(const std::string& dir, backend::cuda::CudaBackend& gpu,
                                const std::vector<Case>& cases, int eos, comm::Communicator* comm,
                                const ModelOptions& options, bool graphs, size_t* captured) {
  const size_t before = gpu.graph_count();
  DecodeOptions decode;
  decode.argmax = true;
  if (graphs) {
    decode.before_step = [&](int live) {
      ASSERT_TRUE(gpu.BeginGraph("tp-decode-b" + std::to_string(live), kBlocksPerSeq).ok());
    };
  }
  ModelRun run = RunModel(dir, gpu, cases, eos, comm, options, decode);
  EXPECT_TRUE(gpu.Synchronize().ok()) << gpu.status().message();
  *captured = gpu.graph_count() - before;
  return run;
}

// What the TP=2 tests check of two ranks' runs: rank 0's prefill logits against transformers'
// (kMaxRelError), and each rank's greedy tokens, through the communicator (`runs`) and through
// the peer all-reduce (`peer_runs`), against one rank's (`single`).
inline void ExpectTwoRanksMatchOne(const std::vector<Case>& cases, const ModelRun& single,
                                   const std::vector<ModelRun>& runs,
                                   const std::vector<ModelRun>& peer_runs) {
  ASSERT_FALSE(runs[0].prefill_logits.empty());
  size_t row = 0;
  const size_t vocab = cases[0].logits[0].size();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_LT(RelError(&runs[0].prefill_logits[row * vocab], cases[i].logits), kMaxRelError)
        << "case " << i;
    row += cases[i].prompt.size();
    EXPECT_EQ(runs[0].tokens[i], single.tokens[i]) << "case " << i << ": TP=2 vs TP=1";
    EXPECT_EQ(runs[1].tokens[i], runs[0].tokens[i]) << "case " << i << ": rank 1 vs rank 0";
    EXPECT_EQ(peer_runs[0].tokens[i], single.tokens[i]) << "case " << i << ": peer all-reduce";
    EXPECT_EQ(peer_runs[1].tokens[i], peer_runs[0].tokens[i]) << "case " << i << ": peer, rank 1";
  }
}

}  // namespace spark::engine::model::testing
