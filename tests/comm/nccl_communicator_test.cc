// NcclCommunicator on the GPUs of this machine (label gpu): one rank per GPU (up to 2), each
// in its own thread, joined through the engine's Rendezvous; all-reduce, all-gather, broadcast
// and barrier results compared with sums computed here.
#include "comm/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <thread>
#include <vector>

namespace spark::comm {
namespace {

std::vector<float> RunRank(std::unique_ptr<Rendezvous> rdv, int world, Status* error,
                           std::vector<float>* gathered, std::vector<float>* broadcast) {
  int rank = rdv->rank();
  auto comm = NcclCommunicator::Create(*rdv, rank, "test", std::chrono::seconds(60));
  if (!comm.ok()) {
    *error = comm.status();
    return {};
  }
  const size_t n = 1000;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((rank + 1) * (i % 17));
  float* d = nullptr;
  float* g = nullptr;
  cudaMalloc(&d, n * sizeof(float));
  cudaMalloc(&g, n * world * sizeof(float));
  cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  *error = (*comm)->AllGather(d, n, g);
  if (error->ok()) *error = (*comm)->AllReduceSum(d, n);
  std::vector<float> out(n);
  cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
  gathered->resize(n * world);
  cudaMemcpy(gathered->data(), g, n * world * sizeof(float), cudaMemcpyDeviceToHost);
  float value = rank == 0 ? 42.f : 0.f;
  cudaMemcpy(d, &value, sizeof(float), cudaMemcpyHostToDevice);
  if (error->ok()) *error = (*comm)->Broadcast(d, sizeof(float), 0);
  if (error->ok()) *error = (*comm)->Barrier();
  broadcast->resize(1);
  cudaMemcpy(broadcast->data(), d, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
  cudaFree(g);
  return out;
}

TEST(NcclCommunicatorTest, CollectivesAcrossTheGpusOfThisMachine) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) GTEST_SKIP() << "no CUDA device";
  const int world = std::min(devices, 2);
  auto r0 = Rendezvous::Connect({0, world, "127.0.0.1", 0, std::chrono::seconds(30)});
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  int port = (*r0)->port();
  std::vector<std::unique_ptr<Rendezvous>> rdv;
  rdv.push_back(std::move(*r0));
  for (int r = 1; r < world; ++r) {
    auto c = Rendezvous::Connect({r, world, "127.0.0.1", port, std::chrono::seconds(30)});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    rdv.push_back(std::move(*c));
  }
  std::vector<Status> errors(world);
  std::vector<std::vector<float>> sums(world), gathers(world), bcasts(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      sums[r] = RunRank(std::move(rdv[r]), world, &errors[r], &gathers[r], &bcasts[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(errors[r].ok()) << errors[r].ToString();
    // sum over ranks of (rank+1) * (i % 17) = (i % 17) * world(world+1)/2.
    float factor = world * (world + 1) / 2.0f;
    for (size_t i = 0; i < sums[r].size(); ++i) ASSERT_EQ(sums[r][i], factor * (i % 17)) << i;
    for (int q = 0; q < world; ++q) {
      for (size_t i = 0; i < 1000; ++i)
        ASSERT_EQ(gathers[r][q * 1000 + i], static_cast<float>((q + 1) * (i % 17)));
    }
    EXPECT_EQ(bcasts[r][0], 42.f);
  }
  EXPECT_GE(NcclCommunicator::LibraryVersion(), 22800);
}

}  // namespace
}  // namespace spark::comm
