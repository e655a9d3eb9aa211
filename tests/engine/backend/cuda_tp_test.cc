// Tensor parallelism on two GPUs: two ranks (threads), each a CudaBackend on its own device,
// NCCL through the engine's rendezvous behind StreamOrderedCommunicator, run the tiny fixtures
// and must give transformers' logits (1e-4 relative) and the same greedy tokens as TP=1. Then
// the same ranks switch on the peer all-reduce: greedy decode again, for the dense fixture in
// CUDA graph steps (the collectives captured), must give the same tokens.
// Skipped with fewer than two GPUs or without NCCL in the build.
#include <gtest/gtest.h>

#include <thread>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/stream_ordered_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/rendezvous.h"
#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_model_util.h"

namespace spark::engine::model {
namespace {

using namespace testing;

struct Param {
  std::string fixture;
  MoeSharding moe;
};

class CudaTensorParallelTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaTensorParallelTest, TwoGpusMatchOneGpu) {
  if (kernels::CudaDeviceCount() < 2) {
    GTEST_SKIP() << "needs two CUDA devices";
  }
  const std::string dir =
      std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + GetParam().fixture;
  int eos = -1;
  const std::vector<Case> cases = LoadCases(dir, &eos);
  const ModelRun single = RunOneGpu(dir, cases, eos);
  constexpr int kWorld = 2;
  auto r0 = comm::Rendezvous::Connect({0, kWorld, "127.0.0.1", 0, std::chrono::seconds(30)});
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  std::vector<std::unique_ptr<comm::Rendezvous>> rdv;
  rdv.push_back(std::move(*r0));
  const int port = rdv[0]->port();
  std::vector<ModelRun> runs(kWorld), peer_runs(kWorld);
  std::vector<size_t> peer_graphs(kWorld, 0);
  const bool dense = GetParam().fixture == "qwen3-tiny";
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::Rendezvous> mine;
      if (r == 0) {
        mine = std::move(rdv[0]);
      } else {
        auto c =
            comm::Rendezvous::Connect({r, kWorld, "127.0.0.1", port, std::chrono::seconds(30)});
        ASSERT_TRUE(c.ok()) << c.status().message();
        mine = std::move(*c);
      }
      // A step that waits on a stuck peer fails in 20 s rather than hang the test.
      auto gpu = backend::cuda::CudaBackend::Create(
          {.device = r, .step_timeout = std::chrono::seconds(20)});
      ASSERT_TRUE(gpu.ok()) << gpu.status().message();
      auto nccl = comm::NcclCommunicator::Create(*mine, r, "tp-test", std::chrono::seconds(60));
      ASSERT_TRUE(nccl.ok()) << nccl.status().message();
      backend::cuda::StreamOrderedCommunicator ordered(nccl->get(), gpu->get());
      runs[r] = RunModel(dir, **gpu, cases, eos, &ordered, {{r, kWorld}, GetParam().moe});
      EXPECT_TRUE((*gpu)->Synchronize().ok()) << (*gpu)->status().message();
      // Collectives are refused inside a graph step (see stream_ordered_communicator.cc).
      ASSERT_TRUE((*gpu)->BeginGraph("tp-refused", kBlocksPerSeq).ok());
      auto scratch = (*gpu)->Allocate(4);
      ASSERT_TRUE(scratch.ok());
      EXPECT_EQ(ordered.AllReduceSum(scratch->data(), 4).code(), StatusCode::kFailedPrecondition);
      std::vector<float> out(4);
      (*gpu)->Download(scratch->data(), out);
      // Both GPUs are in this process: the peer all-reduce must come up, and take collectives
      // inside graph steps.
      Status peer = ordered.EnablePeerAllReduce();
      ASSERT_TRUE(peer.ok()) << peer.message();
      EXPECT_TRUE(ordered.collectives_in_graphs());
      peer_runs[r] = RunArgMaxDecode(dir, **gpu, cases, eos, &ordered,
                                     {{r, kWorld}, GetParam().moe}, dense, &peer_graphs[r]);
    });
  }
  for (auto& t : threads) t.join();
  ExpectTwoRanksMatchOne(cases, single, runs, peer_runs);
  for (int r = 0; r < kWorld; ++r) {
    if (dense) {
      EXPECT_GE(peer_graphs[r], 1u) << "rank " << r << " captured no decode graph";
    } else {
      EXPECT_EQ(peer_graphs[r], 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaTensorParallelTest,
                         ::testing::Values(Param{"qwen3-tiny", MoeSharding::kInsideExperts},
                                           Param{"qwen3-moe-tiny", MoeSharding::kInsideExperts},
                                           Param{"qwen3-moe-tiny", MoeSharding::kByExpert}),
                         [](const auto& info) {
                           std::string n = info.param.fixture + "_" + std::to_string(info.index);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spark::engine::model
