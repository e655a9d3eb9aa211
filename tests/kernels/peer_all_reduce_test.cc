// The peer all-reduce across every visible GPU of this process (up to 8; skipped with fewer than
// two or without peer access between them): each rank's result must be bit-identical to the
// host's sum in rank order, for sizes from one float to the capacity (tails that are no multiple
// of 4, one block and the full 64), calls back to back (the two data halves alternate), and
// 200 replays of captured CUDA graphs with new inputs before each.
#include "kernels/peer_all_reduce.h"

#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

constexpr size_t kCapacity = 262144;

struct Rank {
  cudaStream_t stream = nullptr;
  void* region = nullptr;
  uint64_t* epochs = nullptr;
  float* data = nullptr;
  PeerAllReduceArgs args;
};

class PeerAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int devices = CudaDeviceCount();
    if (devices < 2) GTEST_SKIP() << "needs two CUDA devices";
    world_ = std::min(devices, kPeerMaxRanks);
    for (int a = 0; a < world_; ++a) {
      for (int b = 0; b < world_; ++b) {
        int can = 1;
        if (a != b) cudaDeviceCanAccessPeer(&can, a, b);
        if (!can) GTEST_SKIP() << "GPU " << a << " has no peer access to GPU " << b;
      }
    }
    ranks_.resize(world_);
    for (int r = 0; r < world_; ++r) {
      Rank& k = ranks_[r];
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      for (int p = 0; p < world_; ++p) {
        if (p != r) cudaDeviceEnablePeerAccess(p, 0);
      }
      cudaGetLastError();  // already enabled by an earlier test
      ASSERT_EQ(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&k.region, PeerRegionBytes(kCapacity)), cudaSuccess);
      ASSERT_EQ(cudaMemset(k.region, 0, PeerRegionBytes(kCapacity)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&k.epochs), kPeerEpochBytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(k.epochs, 0, kPeerEpochBytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&k.data), kCapacity * sizeof(float)),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    for (int r = 0; r < world_; ++r) {
      PeerAllReduceArgs& a = ranks_[r].args;
      for (int p = 0; p < world_; ++p) a.regions[p] = ranks_[p].region;
      a.epochs = ranks_[r].epochs;
      a.rank = r;
      a.world = world_;
      a.capacity = kCapacity;
      a.timeout_ns = 20'000'000'000ull;
    }
  }

  void TearDown() override {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      cudaSetDevice(r);
      cudaDeviceSynchronize();
      cudaFree(ranks_[r].region);
      cudaFree(ranks_[r].epochs);
      cudaFree(ranks_[r].data);
      cudaStreamDestroy(ranks_[r].stream);
    }
    cudaSetDevice(0);
  }

  static std::vector<std::vector<float>> Inputs(size_t count, int world, uint32_t seed) {
    std::vector<std::vector<float>> in;
    for (int r = 0; r < world; ++r) in.push_back(Random(count, seed + 97 * r));
    return in;
  }

  static std::vector<float> Want(const std::vector<std::vector<float>>& in) {
    std::vector<float> want(in[0].size(), 0.0f);
    for (const auto& v : in)
      for (size_t i = 0; i < v.size(); ++i) want[i] += v[i];
    return want;
  }

  void Upload(const std::vector<std::vector<float>>& in) {
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaMemcpyAsync(ranks_[r].data, in[r].data(), in[r].size() * sizeof(float),
                                cudaMemcpyHostToDevice, ranks_[r].stream),
                cudaSuccess);
    }
  }

  // Every rank's data[0, count) must equal want exactly.
  void ExpectEverywhere(const std::vector<float>& want, const std::string& what) {
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaStreamSynchronize(ranks_[r].stream), cudaSuccess) << what;
      std::vector<float> got(want.size());
      cudaMemcpy(got.data(), ranks_[r].data, got.size() * sizeof(float), cudaMemcpyDeviceToHost);
      size_t bad = 0;
      for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
      ASSERT_EQ(bad, 0u) << what << ": rank " << r << " differs in " << bad << " of " << want.size()
                         << " floats";
    }
  }

  int world_ = 0;
  std::vector<Rank> ranks_;
};

TEST_F(PeerAllReduceTest, SumsMatchTheHostInRankOrder) {
  uint32_t seed = 1;
  for (size_t count : {size_t{1}, size_t{3}, size_t{4096}, size_t{4099}, size_t{131072},
                       size_t{131077}, kCapacity}) {
    for (int call = 0; call < 3; ++call) {  // back to back: both halves, advancing epochs
      const auto in = Inputs(count, world_, seed++);
      Upload(in);
      for (int r = 0; r < world_; ++r) {
        cudaSetDevice(r);
        SPARK_ASSERT_OK(PeerAllReduceSum(ranks_[r].args, ranks_[r].data, count, ranks_[r].stream));
      }
      ExpectEverywhere(Want(in), std::to_string(count) + " floats, call " + std::to_string(call));
    }
  }
}

TEST_F(PeerAllReduceTest, GraphReplaysTakeNewInputs) {
  constexpr size_t kCount = 4096 * 8;
  std::vector<cudaGraphExec_t> execs(world_);
  for (int r = 0; r < world_; ++r) {
    cudaSetDevice(r);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(ranks_[r].stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    SPARK_ASSERT_OK(PeerAllReduceSum(ranks_[r].args, ranks_[r].data, kCount, ranks_[r].stream));
    ASSERT_EQ(cudaStreamEndCapture(ranks_[r].stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&execs[r], graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
  }
  for (int replay = 0; replay < 200; ++replay) {
    const auto in = Inputs(kCount, world_, 1000 + replay);
    Upload(in);
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaGraphLaunch(execs[r], ranks_[r].stream), cudaSuccess);
    }
    ExpectEverywhere(Want(in), "replay " + std::to_string(replay));
  }
  for (int r = 0; r < world_; ++r) {
    cudaSetDevice(r);
    cudaGraphExecDestroy(execs[r]);
  }
}

TEST(PeerAllReduceArgsTest, RefusesSizesAndRanksOutsideTheLimits) {
  SPARK_SKIP_WITHOUT_GPU();
  PeerAllReduceArgs a;
  a.world = 2;
  a.rank = 0;
  a.capacity = 16;
  DeviceArray<float> data(32);
  EXPECT_EQ(PeerAllReduceSum(a, data.get(), 17, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PeerAllReduceSum(a, data.get() + 1, 4, nullptr).code(),
            StatusCode::kInvalidArgument);  // not 16-byte aligned
  a.world = kPeerMaxRanks + 1;
  EXPECT_EQ(PeerAllReduceSum(a, data.get(), 4, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::kernels
