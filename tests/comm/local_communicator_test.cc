#include "comm/local_communicator.h"

#include <gtest/gtest.h>

#include "tests/comm/comm_test_util.h"

namespace spark::comm {
namespace {

constexpr int kWorld = 4;

TEST(LocalCommunicatorTest, AllReduceSumsAcrossRanks) {
  auto group = CreateLocalGroup(kWorld);
  std::vector<std::vector<float>> data(kWorld);
  RunRanks(kWorld, [&](int r) {
    data[r] = {float(r), float(10 * r), 1.0f};
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(group[r]->AllReduceSum(data[r].data(), 3).ok());
  });
  // Three rounds: sum 0+1+2+3 = 6, then x4, then x4 again.
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(data[r], (std::vector<float>{96.0f, 960.0f, 64.0f}));
  }
}

TEST(LocalCommunicatorTest, AllGatherPlacesEachRankAtItsOffset) {
  auto group = CreateLocalGroup(kWorld);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(2 * kWorld, -1.0f));
  RunRanks(kWorld, [&](int r) {
    const float in[2] = {float(r), float(r) + 0.5f};
    ASSERT_TRUE(group[r]->AllGather(in, 2, out[r].data()).ok());
  });
  const std::vector<float> expected = {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5};
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(out[r], expected);
}

TEST(LocalCommunicatorTest, BroadcastBytesCopiesRootPayload) {
  auto group = CreateLocalGroup(kWorld);
  std::vector<std::vector<uint8_t>> bytes(kWorld);
  bytes[2] = {1, 2, 3, 4, 5};
  RunRanks(kWorld, [&](int r) {
    ASSERT_TRUE(BroadcastBytes(*group[r], &bytes[r], 2).ok());
    ASSERT_TRUE(group[r]->Barrier().ok());
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(bytes[r], (std::vector<uint8_t>{1, 2, 3, 4, 5}));
}

TEST(LocalCommunicatorTest, BadRootIsInvalidArgument) {
  auto group = CreateLocalGroup(1);
  int x = 0;
  EXPECT_EQ(group[0]->Broadcast(&x, sizeof(x), 1).code(), StatusCode::kInvalidArgument);
}

TEST(LocalCommunicatorTest, MismatchedSizesAreReportedOnEveryRank) {
  auto group = CreateLocalGroup(2);
  std::vector<Status> results(2);
  RunRanks(2, [&](int r) {
    std::vector<float> data(r + 1, 1.0f);
    results[r] = group[r]->AllReduceSum(data.data(), data.size());
  });
  for (const Status& s : results) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(LocalCommunicatorTest, MissingRankGivesDeadlineExceededNamingIt) {
  auto group = CreateLocalGroup(3, std::chrono::milliseconds(200));
  std::vector<Status> results(2);
  RunRanks(2, [&](int r) { results[r] = group[r]->Barrier(); });
  bool saw_deadline = false;
  for (const Status& s : results) {
    ASSERT_FALSE(s.ok());
    if (s.code() == StatusCode::kDeadlineExceeded) {
      saw_deadline = true;
      EXPECT_NE(s.message().find("rank(s) 2"), std::string::npos) << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kAborted);
    }
  }
  EXPECT_TRUE(saw_deadline);
  EXPECT_EQ(group[2]->Barrier().code(), StatusCode::kAborted);
}

TEST(LocalCommunicatorTest, FactoryMakesWorldOfOne) {
  CommOptions options;
  options.backend = "local";
  auto comm = CreateCommunicator(options);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  float x = 3.0f;
  ASSERT_TRUE((*comm)->AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 3.0f);
  options.backend = "mpi";
  EXPECT_EQ(CreateCommunicator(options).status().code(), StatusCode::kInvalidArgument);
  options.backend = "local";
  options.rank = 1;
  EXPECT_EQ(CreateCommunicator(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::comm
