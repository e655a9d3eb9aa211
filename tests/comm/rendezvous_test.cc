#include "comm/rendezvous.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/comm/comm_test_util.h"

namespace spark::comm {
namespace {

using std::chrono::milliseconds;

RendezvousOptions Options(int rank, int world, int port, milliseconds timeout) {
  return RendezvousOptions{rank, world, "127.0.0.1", port, timeout};
}

TEST(RendezvousTest, SetThenGetOnAnotherRank) {
  auto master = Rendezvous::Connect(Options(0, 2, 0, milliseconds(2000)));
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  auto other = Rendezvous::Connect(Options(1, 2, (*master)->port(), milliseconds(2000)));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*master)->Set("k", {'v', '1'}).ok());
  auto value = (*other)->Get("k", milliseconds(0));
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, (std::vector<char>{'v', '1'}));
  EXPECT_EQ((*other)->Get("absent", milliseconds(0)).status().code(), StatusCode::kNotFound);
}

TEST(RendezvousTest, GetWaitsForALaterSet) {
  auto master = Rendezvous::Connect(Options(0, 2, 0, milliseconds(2000)));
  ASSERT_TRUE(master.ok());
  auto other = Rendezvous::Connect(Options(1, 2, (*master)->port(), milliseconds(2000)));
  ASSERT_TRUE(other.ok());
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE((*master)->Set("late", {'x'}).ok());
  });
  auto value = (*other)->Get("late", milliseconds(2000));
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, (std::vector<char>{'x'}));
}

TEST(RendezvousTest, JoinReturnsEveryRanksInfo) {
  const int port = FreePort();
  std::vector<std::vector<std::string>> infos(3);
  RunRanks(3, [&](int r) {
    auto rdv = Rendezvous::Connect(Options(r, 3, port, milliseconds(5000)));
    ASSERT_TRUE(rdv.ok()) << rdv.status().ToString();
    auto joined = (*rdv)->Join("s", "host" + std::to_string(r));
    ASSERT_TRUE(joined.ok()) << joined.status().ToString();
    infos[r] = *joined;
    ASSERT_TRUE((*rdv)->Join("again", "").ok());  // Joins can repeat under new sessions.
  });
  for (const auto& info : infos) {
    EXPECT_EQ(info, (std::vector<std::string>{"host0", "host1", "host2"}));
  }
}

TEST(RendezvousTest, RankThatNeverJoinsIsNamed) {
  const int port = FreePort();
  std::vector<Status> results(3);
  RunRanks(2, [&](int r) {  // Rank 2 of 3 never starts.
    auto rdv = Rendezvous::Connect(Options(r, 3, port, milliseconds(500)));
    ASSERT_TRUE(rdv.ok()) << rdv.status().ToString();
    results[r] = (*rdv)->Join("s", "").status();
    if (r == 0) std::this_thread::sleep_for(milliseconds(300));  // Let rank 1 finish asking.
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), StatusCode::kDeadlineExceeded) << results[r].ToString();
    EXPECT_NE(results[r].message().find("rank(s) 2 of 3 never joined"), std::string::npos)
        << results[r].ToString();
    EXPECT_NE(results[r].message().find("rank " + std::to_string(r) + ": rendezvous 127.0.0.1:"),
              std::string::npos)
        << results[r].ToString();
  }
}

TEST(RendezvousTest, MissingMasterIsDeadlineExceededNamingAddress) {
  const int port = FreePort();
  const auto start = Clock::now();
  auto rdv = Rendezvous::Connect(Options(1, 2, port, milliseconds(300)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  ASSERT_FALSE(rdv.ok());
  EXPECT_EQ(rdv.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(rdv.status().message().find("rank 1"), std::string::npos);
  EXPECT_NE(rdv.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << rdv.status().ToString();
}

TEST(RendezvousTest, BusyPortIsUnavailableOnRankZero) {
  auto first = Rendezvous::Connect(Options(0, 1, 0, milliseconds(500)));
  ASSERT_TRUE(first.ok());
  auto second = Rendezvous::Connect(Options(0, 1, (*first)->port(), milliseconds(500)));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
}

}  // namespace
}  // namespace spark::comm
