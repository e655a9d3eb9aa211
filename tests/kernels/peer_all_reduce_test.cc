// The peer all-reduce, both protocols, across every visible GPU of this process (up to 8; skipped
// without peer access between them), or, with one GPU, between two ranks on it (two streams; the
// ranks' kernels run side by side): each rank's result must be bit-identical to the host's sum in
// rank order, for sizes from one float to the capacity (tails that are no multiple of 4, one block
// and the full 64), calls back to back (the data halves, or buffers, rotate), and 200 replays of
// captured CUDA graphs with new inputs before each. The sum fused with the residual add and
// RMSNorm must give bit for bit what the sum followed by the norm kernel gives, and calls of
// either kind and of any size, enqueued back to back, must keep each other's data apart.
// ctest runs this fixture with SPARK_PDL=0 and CUDA_MODULE_LOADING=EAGER
// (tests/kernels/CMakeLists.txt says why).
#include "kernels/peer_all_reduce.h"

#include "kernels/norm.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

constexpr size_t kCapacity = 262144;

struct Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* region = nullptr;
  uint64_t* epochs = nullptr;
  float* data = nullptr;
  PeerAllReduceArgs args;
};

class PeerAllReduceTest : public ::testing::TestWithParam<PeerProtocol> {
 protected:
  void SetUp() override {
    const int devices = CudaDeviceCount();
    if (devices == 0) GTEST_SKIP() << "no CUDA device";
    world_ = devices == 1 ? 2 : std::min(devices, kPeerMaxRanks);
    for (int a = 0; a < devices && a < world_; ++a) {
      for (int b = 0; b < devices && b < world_; ++b) {
        int can = 1;
        if (a != b) cudaDeviceCanAccessPeer(&can, a, b);
        if (!can) GTEST_SKIP() << "GPU " << a << " has no peer access to GPU " << b;
      }
    }
    ranks_.resize(world_);
    for (int r = 0; r < world_; ++r) {
      Rank& k = ranks_[r];
      k.device = devices == 1 ? 0 : r;
      ASSERT_EQ(cudaSetDevice(k.device), cudaSuccess);
      for (int p = 0; p < world_ && devices > 1; ++p) {
        if (p != r) cudaDeviceEnablePeerAccess(p, 0);
      }
      cudaGetLastError();  // already enabled by an earlier test
      ASSERT_EQ(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&k.region, PeerRegionBytes(kCapacity, world_)), cudaSuccess);
      SPARK_ASSERT_OK(PeerRegionInit(k.region, kCapacity, world_));
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
      a.protocol = GetParam();
    }
  }

  void TearDown() override {
    for (Rank& k : ranks_) {
      cudaSetDevice(k.device);
      cudaDeviceSynchronize();
      cudaFree(k.region);
      cudaFree(k.epochs);
      cudaFree(k.data);
      cudaStreamDestroy(k.stream);
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

  // Copies in[r] to rank r's `dst` (rank r's data when null) on its stream.
  void Upload(const std::vector<std::vector<float>>& in, std::vector<float*> dst = {}) {
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(ranks_[r].device);
      ASSERT_EQ(
          cudaMemcpyAsync(dst.empty() ? ranks_[r].data : dst[r], in[r].data(),
                          in[r].size() * sizeof(float), cudaMemcpyHostToDevice, ranks_[r].stream),
          cudaSuccess);
    }
  }

  // Rank r's [p, p + count) once its stream is done.
  std::vector<float> Read(int r, const float* p, size_t count) {
    cudaSetDevice(ranks_[r].device);
    EXPECT_EQ(cudaStreamSynchronize(ranks_[r].stream), cudaSuccess);
    std::vector<float> got(count);
    cudaMemcpy(got.data(), p, count * sizeof(float), cudaMemcpyDeviceToHost);
    return got;
  }

  // Every rank's data[0, count) (or dst[r]) must equal want exactly.
  void ExpectEverywhere(const std::vector<float>& want, const std::string& what,
                        std::vector<float*> dst = {}) {
    for (int r = 0; r < world_; ++r) {
      const std::vector<float> got = Read(r, dst.empty() ? ranks_[r].data : dst[r], want.size());
      size_t bad = 0;
      for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
      ASSERT_EQ(bad, 0u) << what << ": rank " << r << " differs in " << bad << " of " << want.size()
                         << " floats";
    }
  }

  // A device buffer of `count` floats on each rank's device.
  std::vector<float*> PerRank(size_t count) {
    std::vector<float*> out(world_);
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(ranks_[r].device);
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&out[r]), count * sizeof(float)), cudaSuccess);
      owned_.push_back({ranks_[r].device, out[r]});
    }
    return out;
  }

  void FreeOwned() {
    for (auto [device, p] : owned_) {
      cudaSetDevice(device);
      cudaFree(p);
    }
    owned_.clear();
  }

  int world_ = 0;
  std::vector<Rank> ranks_;
  std::vector<std::pair<int, float*>> owned_;
};

TEST_P(PeerAllReduceTest, SumsMatchTheHostInRankOrder) {
  uint32_t seed = 1;
  for (size_t count : {size_t{1}, size_t{3}, size_t{4096}, size_t{4099}, size_t{131072},
                       size_t{131077}, kCapacity}) {
    for (int call = 0; call < 3; ++call) {  // back to back: both halves, advancing epochs
      const auto in = Inputs(count, world_, seed++);
      Upload(in);
      for (Rank& k : ranks_) {
        cudaSetDevice(k.device);
        SPARK_ASSERT_OK(PeerAllReduceSum(k.args, k.data, count, k.stream));
      }
      ExpectEverywhere(Want(in), std::to_string(count) + " floats, call " + std::to_string(call));
    }
  }
}

TEST_P(PeerAllReduceTest, GraphReplaysTakeNewInputs) {
  constexpr size_t kCount = 4096 * 8;
  std::vector<cudaGraphExec_t> execs(world_);
  for (int r = 0; r < world_; ++r) {
    cudaSetDevice(ranks_[r].device);
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
      cudaSetDevice(ranks_[r].device);
      ASSERT_EQ(cudaGraphLaunch(execs[r], ranks_[r].stream), cudaSuccess);
    }
    ExpectEverywhere(Want(in), "replay " + std::to_string(replay));
  }
  for (int r = 0; r < world_; ++r) {
    cudaSetDevice(ranks_[r].device);
    cudaGraphExecDestroy(execs[r]);
  }
}

// A float whose bits are all set (a NaN) is the one-way protocol's empty pattern: it must still
// arrive (as a NaN) rather than leave its reader waiting.
TEST_P(PeerAllReduceTest, AValueWithTheEmptyPatternStillArrives) {
  constexpr size_t kCount = 4096;
  auto in = Inputs(kCount, world_, 77);
  uint32_t empty = 0xFFFFFFFFu;
  std::memcpy(&in[world_ - 1][5], &empty, sizeof(float));
  Upload(in);
  for (Rank& k : ranks_) {
    cudaSetDevice(k.device);
    SPARK_ASSERT_OK(PeerAllReduceSum(k.args, k.data, kCount, k.stream));
  }
  const std::vector<float> want = Want(in);
  for (int r = 0; r < world_; ++r) {
    const std::vector<float> got = Read(r, ranks_[r].data, kCount);
    EXPECT_TRUE(std::isnan(got[5])) << "rank " << r;
    for (size_t i = 0; i < kCount; ++i) {
      if (i == 5) continue;
      ASSERT_EQ(got[i], want[i]) << "rank " << r << ", float " << i;
    }
  }
}

// One fused call against the sum and the norm kernel on copies of the same inputs.
TEST_P(PeerAllReduceTest, FusedAddRmsNormIsTheSumThenTheNorm) {
  constexpr float kEps = 1e-6f;
  for (auto [rows, dim] : {std::pair{1, 4096}, std::pair{3, 4096}, std::pair{32, 4096},
                           std::pair{64, 4096}, std::pair{2, 12}, std::pair{5, 8196}}) {
    const size_t n = size_t(rows) * dim;
    const std::string what = std::to_string(rows) + " x " + std::to_string(dim);
    const auto delta = Inputs(n, world_, 7 + rows);
    const std::vector<float> h0 = Random(n, 5), weight = Random(dim, 6);
    std::vector<float*> d_fused = PerRank(n), d_plain = PerRank(n), h_fused = PerRank(n),
                        h_plain = PerRank(n), out_fused = PerRank(n), out_plain = PerRank(n),
                        w = PerRank(dim);
    std::vector<__nv_bfloat16*> bf_fused(world_), bf_plain(world_);
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(ranks_[r].device);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&bf_fused[r]), n * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&bf_plain[r]), n * 2), cudaSuccess);
    }
    Upload(delta, d_fused);
    Upload(delta, d_plain);
    const std::vector<std::vector<float>> hs(world_, h0), ws(world_, weight);
    Upload(hs, h_fused);
    Upload(hs, h_plain);
    Upload(ws, w);
    for (int r = 0; r < world_; ++r) {
      const Rank& k = ranks_[r];
      cudaSetDevice(k.device);
      SPARK_ASSERT_OK(PeerAllReduceAddRmsNorm(k.args, d_fused[r], rows, dim, h_fused[r], w[r], kEps,
                                              out_fused[r], bf_fused[r], k.stream));
    }
    for (int r = 0; r < world_; ++r) {
      const Rank& k = ranks_[r];
      cudaSetDevice(k.device);
      SPARK_ASSERT_OK(PeerAllReduceSum(k.args, d_plain[r], n, k.stream));
      SPARK_ASSERT_OK(RmsNorm<float>(d_plain[r], h_plain[r], w[r], rows, dim, kEps, out_plain[r],
                                     k.stream, bf_plain[r]));
    }
    const std::vector<float> sum = Want(delta);
    for (int r = 0; r < world_; ++r) {
      EXPECT_EQ(Read(r, d_fused[r], n), sum) << what << ": the sum, rank " << r;
      EXPECT_EQ(Read(r, h_fused[r], n), Read(r, h_plain[r], n)) << what << ": h, rank " << r;
      const std::vector<float> out = Read(r, out_fused[r], n);
      EXPECT_EQ(out, Read(r, out_plain[r], n)) << what << ": out, rank " << r;
      std::vector<uint16_t> a(n), b(n);
      cudaMemcpy(a.data(), bf_fused[r], n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(b.data(), bf_plain[r], n * 2, cudaMemcpyDeviceToHost);
      EXPECT_EQ(a, b) << what << ": bf16 copy, rank " << r;
      // And the norm itself, against the host (in case both kernels went wrong alike).
      double worst = 0;
      for (int row = 0; row < rows; ++row) {
        double ss = 0;
        for (int i = 0; i < dim; ++i) {
          const double v = double(h0[row * dim + i]) + sum[row * dim + i];
          ss += v * v;
        }
        const double inv = 1.0 / std::sqrt(ss / dim + kEps);
        for (int i = 0; i < dim; ++i) {
          const double v = (double(h0[row * dim + i]) + sum[row * dim + i]) * inv * weight[i];
          worst = std::max(worst, std::abs(v - out[row * dim + i]) / (1.0 + std::abs(v)));
        }
      }
      EXPECT_LT(worst, 1e-5) << what << ": out against the host, rank " << r;
    }
    for (int r = 0; r < world_; ++r) {
      cudaSetDevice(ranks_[r].device);
      cudaFree(bf_fused[r]);
      cudaFree(bf_plain[r]);
    }
    FreeOwned();
  }
}

// Calls of both kinds and of sizes that split into 1 to 64 blocks, enqueued back to back with
// no host wait between them, each into its own buffers: each must come out as if alone.
TEST_P(PeerAllReduceTest, MixedCallsKeepEachOthersData) {
  struct Step {
    bool fused;
    size_t rows, dim;  // plain calls: rows * dim floats
  };
  const Step steps[] = {{true, 1, 4096},    {false, 1, 4096},  {false, 1, 151936}, {true, 1, 4096},
                        {true, 32, 4096},   {false, 37, 1000}, {false, 1, 4096},   {true, 64, 4096},
                        {false, 1, 262144}, {true, 1, 4096},   {true, 1, 4096},    {false, 1, 3}};
  std::vector<std::vector<std::vector<float>>> inputs;
  std::vector<std::vector<float*>> bufs, hbufs, outs;
  const std::vector<float> weight = Random(4096, 3);
  std::vector<float*> w = PerRank(4096);
  Upload(std::vector<std::vector<float>>(world_, weight), w);
  uint32_t seed = 100;
  for (const Step& s : steps) {
    const size_t n = s.rows * s.dim;
    inputs.push_back(Inputs(n, world_, seed++));
    bufs.push_back(PerRank(n));
    Upload(inputs.back(), bufs.back());
    hbufs.push_back(PerRank(n));
    outs.push_back(PerRank(n));
    Upload(std::vector<std::vector<float>>(world_, std::vector<float>(n, 0.5f)), hbufs.back());
  }
  for (int r = 0; r < world_; ++r) {
    const Rank& k = ranks_[r];
    cudaSetDevice(k.device);
    for (size_t i = 0; i < std::size(steps); ++i) {
      const Step& s = steps[i];
      if (s.fused) {
        SPARK_ASSERT_OK(PeerAllReduceAddRmsNorm(k.args, bufs[i][r], s.rows, s.dim, hbufs[i][r],
                                                w[r], 1e-6f, outs[i][r], nullptr, k.stream));
      } else {
        SPARK_ASSERT_OK(PeerAllReduceSum(k.args, bufs[i][r], s.rows * s.dim, k.stream));
      }
    }
  }
  for (size_t i = 0; i < std::size(steps); ++i) {
    ExpectEverywhere(Want(inputs[i]), "call " + std::to_string(i), bufs[i]);
  }
  FreeOwned();
}

INSTANTIATE_TEST_SUITE_P(Protocols, PeerAllReduceTest,
                         ::testing::Values(PeerProtocol::kSignal, PeerProtocol::kOneWay),
                         [](const auto& info) {
                           return info.param == PeerProtocol::kSignal ? "Signal" : "OneWay";
                         });

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
  float* d = data.get();
  EXPECT_TRUE(PeerAddRmsNormFits(a, d, 2, 8, d, d, d, nullptr));
  EXPECT_FALSE(PeerAddRmsNormFits(a, d, 3, 8, d, d, d, nullptr));      // 24 floats > 16
  EXPECT_FALSE(PeerAddRmsNormFits(a, d, 1, 6, d, d, d, nullptr));      // dim not a multiple of 4
  EXPECT_FALSE(PeerAddRmsNormFits(a, d + 1, 1, 8, d, d, d, nullptr));  // not aligned
  a.capacity = 1 << 20;
  EXPECT_FALSE(PeerAddRmsNormFits(a, d, kPeerMaxBlocks + 1, 8, d, d, d, nullptr));
  EXPECT_EQ(
      PeerAllReduceAddRmsNorm(a, d, kPeerMaxBlocks + 1, 8, d, d, 1e-6f, d, nullptr, nullptr).code(),
      StatusCode::kInvalidArgument);
  a.capacity = 18;  // not a multiple of 4
  EXPECT_EQ(PeerAllReduceSum(a, data.get(), 4, nullptr).code(), StatusCode::kInvalidArgument);
  a.capacity = 16;
  a.world = kPeerMaxRanks + 1;
  EXPECT_EQ(PeerAllReduceSum(a, data.get(), 4, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::kernels
