// Tensor parallelism with two ranks on one GPU: two threads, each a CudaBackend on device 0,
// joined by LocalCommunicator behind StreamOrderedCommunicator (no NCCL: it refuses two ranks on
// one device). First with collectives through host memory, which must give transformers' logits
// (1e-4 relative) and the same greedy tokens as one rank; then with the peer all-reduce between
// the two ranks' memory, for the dense fixture in CUDA graph steps, with its sum fused into the
// AddRmsNorm after it (and once without, for the same tokens both ways), with either protocol.
// This is the TP=2 path of a two-GPU host (shards, peer all-reduce, graphs) on the one GPU a
// test machine may have; the two-GPU test (cuda_tp_test.cc) covers NCCL and peer access.
// Runs with SPARK_PDL=0 and CUDA_MODULE_LOADING=EAGER (CMakeLists.txt): with dependent launch,
// one rank's next kernel may be placed while its all-reduce waits for the other rank and fill
// the GPU, so the other rank's kernels never run; and loading a kernel on its first launch
// waits for every kernel running in the context, the other rank's all-reduce among them, which
// waits for this rank. Ranks on their own GPUs block each other neither way.
#include <gtest/gtest.h>

#include <thread>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/stream_ordered_communicator.h"
#include "comm/local_communicator.h"
#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_model_util.h"

namespace spark::engine::model {
namespace {

using namespace testing;

struct Param {
  std::string fixture;
  MoeSharding moe;
  bool fuse = true;  // CudaBackend::Options::fuse_all_reduce_norm
  kernels::PeerProtocol protocol = kernels::PeerProtocol::kSignal;
};

class CudaTensorParallelOneGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaTensorParallelOneGpuTest, TwoRanksOnOneGpuMatchOneRank) {
  if (kernels::CudaDeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  const Param& param = GetParam();
  const std::string dir = std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + param.fixture;
  int eos = -1;
  const std::vector<Case> cases = LoadCases(dir, &eos);
  const ModelRun single = RunOneGpu(dir, cases, eos);
  constexpr int kWorld = 2;
  auto group = std::make_shared<comm::LocalGroupState>(kWorld, std::chrono::seconds(60));
  std::vector<ModelRun> runs(kWorld), peer_runs(kWorld);
  std::vector<size_t> peer_graphs(kWorld, 0);
  std::vector<int64_t> fused(kWorld, 0);
  const bool dense = param.fixture == "qwen3-tiny";
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      // A step that waits on a stuck peer fails in 20 s rather than hang the test.
      auto gpu = backend::cuda::CudaBackend::Create({.device = 0,
                                                     .step_timeout = std::chrono::seconds(20),
                                                     .fuse_all_reduce_norm = param.fuse});
      ASSERT_TRUE(gpu.ok()) << gpu.status().message();
      comm::LocalCommunicator local(r, group);
      backend::cuda::StreamOrderedCommunicator ordered(&local, gpu->get());
      runs[r] = RunModel(dir, **gpu, cases, eos, &ordered, {{r, kWorld}, param.moe});
      EXPECT_TRUE((*gpu)->Synchronize().ok()) << (*gpu)->status().message();
      EXPECT_EQ((*gpu)->fused_reduce_norms(), 0);  // no peer all-reduce yet
      Status peer = ordered.EnablePeerAllReduce(size_t{1} << 18, param.protocol);
      ASSERT_TRUE(peer.ok()) << peer.message();
      EXPECT_TRUE(ordered.collectives_in_graphs());
      peer_runs[r] = RunArgMaxDecode(dir, **gpu, cases, eos, &ordered, {{r, kWorld}, param.moe},
                                     dense, &peer_graphs[r]);
      fused[r] = (*gpu)->fused_reduce_norms();
    });
  }
  for (auto& t : threads) t.join();
  ExpectTwoRanksMatchOne(cases, single, runs, peer_runs);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(peer_graphs[r] >= 1, dense) << "rank " << r << ": decode graphs captured";
    // Every layer's two AddRmsNorms but the last layer's second (an Add) take the sum in.
    EXPECT_EQ(fused[r] > 0, param.fuse) << "rank " << r << ": fused all-reduce + norm";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaTensorParallelOneGpuTest,
                         ::testing::Values(Param{"qwen3-tiny", MoeSharding::kInsideExperts},
                                           Param{"qwen3-tiny", MoeSharding::kInsideExperts, false},
                                           Param{"qwen3-moe-tiny", MoeSharding::kInsideExperts},
                                           Param{"qwen3-moe-tiny", MoeSharding::kByExpert},
                                           Param{"qwen3-tiny", MoeSharding::kInsideExperts, true,
                                                 kernels::PeerProtocol::kOneWay},
                                           Param{"qwen3-moe-tiny", MoeSharding::kByExpert, true,
                                                 kernels::PeerProtocol::kOneWay}),
                         [](const auto& info) {
                           std::string n = info.param.fixture + "_" + std::to_string(info.index);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spark::engine::model
