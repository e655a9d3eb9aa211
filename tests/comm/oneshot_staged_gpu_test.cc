// The one-shot transport for GPU tensors (label gpu): ranks as threads sharing one GPU, each on
// its own stream, joined over the socket wire on loopback (mesh of two, ring of four: rank 0
// and rank 2 exchange through a neighbour), staged through pinned host memory. Sums and
// gathers equal the rank-order sums computed here bit for bit, also when the kernel is captured
// in a CUDA graph and replayed with new data each time; a rank that never calls is named by
// the others' transports, and their kernels stop (trap) instead of spinning.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/oneshot_cuda/staged_group.h"
#include "tests/comm/comm_test_util.h"

namespace spark::comm::oneshot {
namespace {

using std::chrono::milliseconds;

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

OneShotOptions Options(Topology topology, milliseconds timeout) {
  OneShotOptions o;
  o.topology = topology;
  o.capacity_bytes = 256 << 10;
  o.addresses = {"127.0.0.1"};
  o.transport.timeout = timeout;
  return o;
}

// One StagedOneShot per rank, created on the ranks' threads (set-up is collective).
std::vector<std::unique_ptr<StagedOneShot>> Group(int n, const OneShotOptions& o,
                                                  std::vector<std::unique_ptr<Communicator>>* keep) {
  *keep = CreateLocalGroup(n, milliseconds(30000));
  std::vector<std::unique_ptr<StagedOneShot>> out(n);
  RunRanks(n, [&](int r) {
    auto g = StagedOneShot::Create(*(*keep)[r], 0, o);
    EXPECT_TRUE(g.ok()) << "rank " << r << ": " << g.status().ToString();
    if (g.ok()) out[r] = std::move(*g);
  });
  return out;
}

std::vector<float> Data(int rank, int call, size_t count) {
  std::mt19937 gen(7919 * rank + call);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> RankOrderSum(int world, int call, size_t count) {
  std::vector<float> sum = Data(0, call, count);
  for (int s = 1; s < world; ++s) {
    std::vector<float> x = Data(s, call, count);
    for (size_t i = 0; i < count; ++i) sum[i] += x[i];
  }
  return sum;
}

class StagedOneShotGpuTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(StagedOneShotGpuTest, SumsAndGathersAreExactOnOneGpu) {
  const int n = GetParam();
  std::vector<std::unique_ptr<Communicator>> locals;
  auto group = Group(n, Options(n > 2 ? Topology::kRing : Topology::kMesh, milliseconds(20000)),
                     &locals);
  for (auto& g : group) ASSERT_NE(g, nullptr);
  const std::vector<size_t> counts = {1, 100, 2048, 16384, 65536};
  RunRanks(n, [&](int r) {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    float* d = nullptr;
    float* gathered = nullptr;
    ASSERT_EQ(cudaMalloc(&d, 65536 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&gathered, n * 4096 * sizeof(float)), cudaSuccess);
    for (int call = 0; call < 20; ++call) {
      const size_t count = counts[call % counts.size()];
      std::vector<float> mine = Data(r, call, count), got(count);
      // On the rank's stream: a copy from pageable memory on the legacy stream may return
      // before it lands, and a non-blocking stream would not wait for it.
      ASSERT_EQ(cudaMemcpyAsync(d, mine.data(), count * 4, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
      Status s = group[r]->EnqueueAllReduceSum(d, count, stream);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << group[r]->broken().ToString();
      ASSERT_EQ(cudaMemcpy(got.data(), d, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<float> want = RankOrderSum(n, call, count);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), count * 4), 0) << "rank " << r << " call "
                                                                     << call;
    }
    std::vector<float> mine = Data(r, 99, 4096), got(n * 4096);
    ASSERT_EQ(cudaMemcpyAsync(d, mine.data(), 4096 * 4, cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_TRUE(group[r]->EnqueueAllGather(d, 4096, gathered, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), gathered, got.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int s = 0; s < n; ++s) {
      std::vector<float> want = Data(s, 99, 4096);
      ASSERT_EQ(std::memcmp(got.data() + s * 4096, want.data(), 4096 * 4), 0) << "slice " << s;
    }
    cudaFree(d);
    cudaFree(gathered);
    cudaStreamDestroy(stream);
  });
}

// The kernel captured once per rank (after a host-to-device copy of that replay's input from
// pinned memory), replayed 30 times: the device-side epoch carries the sequence numbers.
TEST_P(StagedOneShotGpuTest, CapturedGraphReplaysStayExact) {
  const int n = GetParam();
  std::vector<std::unique_ptr<Communicator>> locals;
  auto group = Group(n, Options(n > 2 ? Topology::kRing : Topology::kMesh, milliseconds(20000)),
                     &locals);
  for (auto& g : group) ASSERT_NE(g, nullptr);
  const size_t count = 2560;  // 10 KiB, a decode step's all-reduce
  RunRanks(n, [&](int r) {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    float *d = nullptr, *pinned = nullptr;
    ASSERT_EQ(cudaMalloc(&d, count * 4), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&pinned, count * 4), cudaSuccess);
    // One eager call first: the graph continues the same sequence.
    std::vector<float> first = Data(r, 0, count);
    ASSERT_EQ(cudaMemcpyAsync(d, first.data(), count * 4, cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_TRUE(group[r]->EnqueueAllReduceSum(d, count, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(d, pinned, count * 4, cudaMemcpyHostToDevice, stream), cudaSuccess);
    Status captured = group[r]->EnqueueAllReduceSum(d, count, stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(captured.ok()) << captured.ToString();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    std::vector<float> got(count);
    for (int replay = 1; replay <= 30; ++replay) {
      std::vector<float> mine = Data(r, replay, count);
      std::memcpy(pinned, mine.data(), count * 4);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << group[r]->broken().ToString();
      ASSERT_EQ(cudaMemcpy(got.data(), d, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<float> want = RankOrderSum(n, replay, count);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), count * 4), 0) << "rank " << r
                                                                     << " replay " << replay;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFreeHost(pinned);
    cudaFree(d);
    cudaStreamDestroy(stream);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedOneShotGpuTest, ::testing::Values(2, 4));

// Rank 1 of two never calls: rank 0's transport names it after the 1 s bound and its kernel
// stops (the trap makes the stream's wait fail) rather than spin. The trap ends the process's
// CUDA context: this case runs alone (one ctest entry per case).
TEST(StagedOneShotFailureGpuTest, AStalledRankIsNamedAndTheKernelStops) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::vector<std::unique_ptr<Communicator>> locals;
  auto group = Group(2, Options(Topology::kMesh, milliseconds(1000)), &locals);
  for (auto& g : group) ASSERT_NE(g, nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 1024 * sizeof(float)), cudaSuccess);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(group[0]->EnqueueAllReduceSum(d, 1024, stream).ok());
  const cudaError_t e = cudaStreamSynchronize(stream);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e, cudaSuccess) << "the kernel finished without rank 1's slice";
  EXPECT_LT(seconds, 10.0);
  const Status broken = group[0]->broken();
  EXPECT_EQ(broken.code(), StatusCode::kDeadlineExceeded) << broken.ToString();
  EXPECT_NE(broken.message().find("nothing from rank 1"), std::string::npos) << broken.ToString();
  // Later calls are refused with the same error.
  EXPECT_EQ(group[0]->EnqueueAllReduceSum(d, 1024, stream), broken);
}

}  // namespace
}  // namespace spark::comm::oneshot
