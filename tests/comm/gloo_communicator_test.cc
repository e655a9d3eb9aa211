#include "comm/gloo_communicator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/comm/comm_test_util.h"

namespace spark::comm {
namespace {

using std::chrono::milliseconds;

CommOptions Options(int rank, int world, int port, milliseconds timeout) {
  CommOptions options;
  options.backend = "gloo";
  options.rank = rank;
  options.world_size = world;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.timeout = timeout;
  return options;
}

// Every collective once on `comm`; returns the first failure. Checks values with EXPECT.
Status Exercise(Communicator& comm) {
  const int r = comm.rank();
  const int n = comm.world_size();
  std::vector<float> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(r + 1) * float(i);
  SPARK_RETURN_IF_ERROR(comm.AllReduceSum(data.data(), data.size()));
  const float factor = float(n * (n + 1) / 2);
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(data[i], factor * float(i)) << i;

  const float in[2] = {float(r), -float(r)};
  std::vector<float> out(2 * n, 99.0f);
  SPARK_RETURN_IF_ERROR(comm.AllGather(in, 2, out.data()));
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(out[2 * k], float(k));
    EXPECT_EQ(out[2 * k + 1], -float(k));
  }
  std::vector<uint8_t> bytes;
  if (r == n - 1) bytes = {7, 8, 9};
  SPARK_RETURN_IF_ERROR(BroadcastBytes(comm, &bytes, n - 1));
  EXPECT_EQ(bytes, (std::vector<uint8_t>{7, 8, 9}));
  return comm.Barrier();
}

TEST(GlooCommunicatorTest, ThreeRanksOnLoopbackAgree) {
  const int port = FreePort();
  RunRanks(3, [&](int r) {
    auto comm = CreateCommunicator(Options(r, 3, port, milliseconds(10000)));
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    Status s = Exercise(**comm);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
}

TEST(GlooCommunicatorTest, WorldOfOneIsANoOp) {
  auto comm = CreateCommunicator(Options(0, 1, FreePort(), milliseconds(5000)));
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  EXPECT_TRUE(Exercise(**comm).ok());
}

// Real processes: the parent is rank 0, forked children the others; a child's exit code says
// whether its checks passed.
TEST(GlooCommunicatorTest, ForkedProcessesAllReduce) {
  constexpr int kWorld = 2;
  const int port = FreePort();
  std::vector<pid_t> children;
  for (int r = 1; r < kWorld; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto comm = CreateCommunicator(Options(r, kWorld, port, milliseconds(10000)));
      if (!comm.ok()) _exit(2);
      float x[4] = {1, 2, 3, 4};
      const bool ok =
          (*comm)->AllReduceSum(x, 4).ok() && x[0] == 2 && x[3] == 8 && (*comm)->Barrier().ok();
      _exit(ok ? 0 : 3);
    }
    children.push_back(pid);
  }
  auto comm = CreateCommunicator(Options(0, kWorld, port, milliseconds(10000)));
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  float x[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*comm)->AllReduceSum(x, 4).ok());
  EXPECT_EQ(x[3], 8.0f);
  ASSERT_TRUE((*comm)->Barrier().ok());
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
}

TEST(GlooCommunicatorTest, RankThatNeverShowsUpIsNamed) {
  const int port = FreePort();
  std::vector<Status> results(2);
  const auto start = Clock::now();
  RunRanks(2, [&](int r) {  // Rank 2 of 3 never starts.
    results[r] = CreateCommunicator(Options(r, 3, port, milliseconds(800))).status();
    if (r == 0) std::this_thread::sleep_for(milliseconds(300));
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_NE(s.message().find("rank(s) 2 of 3 never joined"), std::string::npos) << s.ToString();
  }
}

TEST(GlooCommunicatorTest, PeerThatDiesMidCollectiveIsAnErrorNotAHang) {
  const int port = FreePort();
  Status survivor;
  RunRanks(2, [&](int r) {
    auto comm = CreateCommunicator(Options(r, 2, port, milliseconds(1000)));
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    ASSERT_TRUE((*comm)->Barrier().ok());
    if (r == 1) return;  // Rank 1 leaves; its communicator closes its sockets.
    std::this_thread::sleep_for(milliseconds(100));
    float x = 1.0f;
    survivor = (*comm)->AllReduceSum(&x, 1);
  });
  EXPECT_FALSE(survivor.ok());
  EXPECT_NE(survivor.message().find("rank 0: gloo allreduce"), std::string::npos)
      << survivor.ToString();
}

}  // namespace
}  // namespace spark::comm
