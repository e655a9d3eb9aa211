// The one-shot transport over its socket wire on loopback, ranks as threads (the fallback and
// the set-up exchange: a LocalCommunicator group): exact, bit-identical sums in rank order on
// 2/3/4/8 ranks, mesh and ring (the ring relays non-adjacent ranks), all-gathers, the size
// switch, and failing closed: a rank that stops calling is named (with its relay) within the
// timeout, the failure reaches every rank, and later calls are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/oneshot/oneshot_communicator.h"
#include "tests/comm/comm_test_util.h"

namespace spark::comm::oneshot {
namespace {

using std::chrono::milliseconds;

OneShotOptions Options(Topology topology, milliseconds timeout = milliseconds(10000),
                       size_t capacity = 64 << 10) {
  OneShotOptions o;
  o.topology = topology;
  o.capacity_bytes = capacity;
  o.addresses = {"127.0.0.1"};
  o.transport.timeout = timeout;
  o.transport.spin = std::chrono::microseconds(50);
  return o;
}

// Each rank's communicator, created on its own thread (set-up is collective).
std::vector<std::unique_ptr<OneShotCommunicator>> Group(int n, const OneShotOptions& o) {
  auto locals = CreateLocalGroup(n, milliseconds(20000));
  std::vector<std::unique_ptr<OneShotCommunicator>> out(n);
  std::vector<Status> errors(n);
  RunRanks(n, [&](int r) {
    auto c = OneShotCommunicator::Create(std::move(locals[r]), o);
    if (c.ok()) {
      out[r] = std::move(*c);
    } else {
      errors[r] = c.status();
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r].ToString();
  return out;
}

std::vector<float> Data(int rank, int call, size_t count) {
  std::mt19937 gen(1000 * rank + call);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Case {
  Topology topology;
  int world;
};

class OneShotSumTest : public ::testing::TestWithParam<Case> {};

TEST_P(OneShotSumTest, SumsAreExactInRankOrderAndIdenticalOnEveryRank) {
  const auto [topology, n] = GetParam();
  // Slots of 256 KiB: the largest call is the one the staged GPU path got wrong on a 4-ring.
  auto group = Group(n, Options(topology, milliseconds(10000), 256 << 10));
  ASSERT_EQ(group.size(), static_cast<size_t>(n));
  for (auto& c : group) ASSERT_NE(c, nullptr);
  const std::vector<size_t> counts = {1, 7, 1024, 2560, 16384, 65536};  // 4 B .. 256 KiB
  std::vector<std::vector<std::vector<float>>> results(n);
  RunRanks(n, [&](int r) {
    for (int call = 0; call < 40; ++call) {
      const size_t count = counts[call % counts.size()];
      std::vector<float> data = Data(r, call, count);
      Status s = group[r]->AllReduceSum(data.data(), count);
      ASSERT_TRUE(s.ok()) << s.ToString();
      results[r].push_back(std::move(data));
    }
  });
  for (int call = 0; call < 40; ++call) {
    const size_t count = counts[call % counts.size()];
    std::vector<float> want = Data(0, call, count);
    for (int s = 1; s < n; ++s) {
      std::vector<float> x = Data(s, call, count);
      for (size_t i = 0; i < count; ++i) want[i] += x[i];
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(results[r][call].data(), want.data(), count * sizeof(float)), 0)
          << "rank " << r << " call " << call << " differs from the rank-order sum";
    }
  }
  for (auto& c : group) {
    EXPECT_EQ(c->oneshot_calls(), 40u);
    EXPECT_EQ(c->fallback_calls(), 0u);
  }
}

TEST_P(OneShotSumTest, AllGatherPlacesEveryRanksSlice) {
  const auto [topology, n] = GetParam();
  auto group = Group(n, Options(topology));
  for (auto& c : group) ASSERT_NE(c, nullptr);
  const size_t count = 300;
  RunRanks(n, [&](int r) {
    for (int call = 0; call < 5; ++call) {
      std::vector<float> in = Data(r, call, count), out(n * count, -1.0f);
      ASSERT_TRUE(group[r]->AllGather(in.data(), count, out.data()).ok());
      for (int s = 0; s < n; ++s) {
        std::vector<float> want = Data(s, call, count);
        ASSERT_EQ(std::memcmp(out.data() + s * count, want.data(), count * sizeof(float)), 0)
            << "rank " << r << " slice of " << s;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Groups, OneShotSumTest,
                         ::testing::Values(Case{Topology::kMesh, 2}, Case{Topology::kMesh, 3},
                                           Case{Topology::kMesh, 4}, Case{Topology::kRing, 3},
                                           Case{Topology::kRing, 4}, Case{Topology::kRing, 8},
                                           Case{Topology::kLine, 4}, Case{Topology::kMesh, 8}));

TEST(OneShotTest, LargerTensorsBroadcastsAndBarriersTakeTheFallback) {
  auto group = Group(2, Options(Topology::kMesh));
  for (auto& c : group) ASSERT_NE(c, nullptr);
  RunRanks(2, [&](int r) {
    std::vector<float> big(20000, static_cast<float>(r + 1));  // 80 KB > 64 KiB
    ASSERT_TRUE(group[r]->AllReduceSum(big.data(), big.size()).ok());
    EXPECT_EQ(big[12345], 3.0f);
    int value = r == 1 ? 42 : 0;
    ASSERT_TRUE(group[r]->Broadcast(&value, sizeof(value), 1).ok());
    EXPECT_EQ(value, 42);
    ASSERT_TRUE(group[r]->Barrier().ok());
  });
  EXPECT_EQ(group[0]->fallback_calls(), 1u);
  EXPECT_EQ(group[0]->oneshot_calls(), 0u);
}

TEST(OneShotTest, DifferentSizesOnTheRanksFailNamingTheRank) {
  auto group = Group(3, Options(Topology::kMesh, milliseconds(3000)));
  for (auto& c : group) ASSERT_NE(c, nullptr);
  std::vector<Status> got(3);
  RunRanks(3, [&](int r) {
    std::vector<float> data(r == 2 ? 8 : 16, 1.0f);
    got[r] = group[r]->AllReduceSum(data.data(), data.size());
  });
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(got[r].ok()) << "rank " << r;
  // Rank 0 finds rank 2's 32 bytes, or first hears from rank 2 that rank 0's were 64.
  EXPECT_TRUE(got[0].message().find("rank 2 sent 32 bytes") != std::string::npos ||
              got[0].message().find("rank 0 sent 64 bytes") != std::string::npos)
      << got[0].ToString();
  EXPECT_NE(got[0].message().find("different collectives"), std::string::npos);
}

// Rank 2 of a ring of four stops calling: rank 0, which gets rank 2's slice through rank 3,
// names rank 2 and the relay within the timeout; every rank fails; later calls are refused at
// once with the first error.
TEST(OneShotTest, AStalledRankIsNamedWithinTheTimeoutAndTheGroupFailsClosed) {
  const auto timeout = milliseconds(800);
  auto group = Group(4, Options(Topology::kRing, timeout));
  for (auto& c : group) ASSERT_NE(c, nullptr);
  std::vector<Status> first(4), later(4);
  std::vector<double> waited(4);
  std::atomic<bool> stop_stalled{false};
  RunRanks(4, [&](int r) {
    std::vector<float> data(256, 1.0f);
    ASSERT_TRUE(group[r]->AllReduceSum(data.data(), data.size()).ok());
    if (r == 2) {  // stalls: never calls again while the others wait
      while (!stop_stalled.load()) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    first[r] = group[r]->AllReduceSum(data.data(), data.size());
    waited[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto again = std::chrono::steady_clock::now();
    later[r] = group[r]->AllReduceSum(data.data(), data.size());
    EXPECT_LT(std::chrono::steady_clock::now() - again, milliseconds(50)) << "rank " << r;
    if (r == 0) stop_stalled = true;
  });
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(first[r].ok()) << "rank " << r;
    EXPECT_NE(first[r].message().find("rank 2"), std::string::npos) << first[r].ToString();
    EXPECT_LT(waited[r], 3.0 * timeout.count() / 1000.0) << "rank " << r;
    EXPECT_EQ(later[r], first[r]) << "rank " << r;
  }
  // Rank 0 waits on rank 2 through rank 3 (or hears of it from a neighbour first).
  EXPECT_TRUE(first[0].message().find("rank 2 (relayed through rank 3)") != std::string::npos ||
              first[0].message().find("stopped by rank") != std::string::npos)
      << first[0].ToString();
}

TEST(OneShotTest, RefusesWhatItCannotCarry) {
  auto locals = CreateLocalGroup(1);
  OneShotOptions o = Options(Topology::kMesh);
  o.wire = "carrier-pigeon";
  EXPECT_EQ(OneShotCommunicator::Create(std::move(locals[0]), o).status().code(),
            StatusCode::kInvalidArgument);
  locals = CreateLocalGroup(1);
  o = Options(Topology::kMesh);
  o.capacity_bytes = 0;
  EXPECT_EQ(OneShotCommunicator::Create(std::move(locals[0]), o).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::comm::oneshot
