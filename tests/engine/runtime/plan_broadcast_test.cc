#include "engine/runtime/plan_broadcast.h"

#include <gtest/gtest.h>

#include <thread>

#include "engine/runtime/engine.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

constexpr int kWorld = 3;
constexpr int kVocab = 50;
constexpr int kBlocks = 32;
constexpr int kBs = 4;

TEST(PlanBroadcastTest, WorkersRunExactlyRankZerosPlans) {
  auto group = comm::CreateLocalGroup(kWorld, std::chrono::seconds(10));
  std::vector<std::unique_ptr<FakeModelRunner>> runners;
  for (int r = 0; r < kWorld; ++r) {
    runners.push_back(std::make_unique<FakeModelRunner>(kVocab, kBlocks, kBs));
  }
  std::vector<Status> worker_status(kWorld);
  std::vector<std::thread> workers;
  for (int r = 1; r < kWorld; ++r) {
    workers.emplace_back([&, r] { worker_status[r] = RunWorkerLoop(*group[r], *runners[r]); });
  }
  BroadcastingModelRunner rank0(group[0].get(), runners[0].get());
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = 8;
  options.blocks = {kBlocks, kBs, true};
  auto engine = Engine::Create(options, &rank0).value();
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 5;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->AddRequest(i, {1, 2, 3, 4, 5, i}, p).ok());
  while (engine->HasUnfinished()) ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(rank0.Shutdown().ok());
  for (auto& t : workers) t.join();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_TRUE(worker_status[r].ok()) << worker_status[r].ToString();
    EXPECT_EQ(runners[r]->plans(), runners[0]->plans()) << "rank " << r;
    EXPECT_EQ(runners[r]->cache(), runners[0]->cache()) << "rank " << r;
  }
  EXPECT_GT(runners[0]->plans().size(), 5u);
}

}  // namespace
}  // namespace spark::engine::runtime
