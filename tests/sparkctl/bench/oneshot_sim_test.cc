// The one-shot transport on simulated clusters, through the real sparkctl and spark-bench
// binaries over the veth "DAC cables" (socket wire; the simulator has no RDMA): exact sums on a
// pair and on rings of 3, 4 and 8 nodes (every non-adjacent rank relayed by its neighbours), a
// rank killed mid-run is named within the bound, and a stalled (SIGSTOP) rank is named once
// the collective timeout passes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
using spark::testing::Output;
using Clock = std::chrono::steady_clock;

Output Sh(const std::string& command) { return spark::testing::Shell(command, true); }

class OneShotSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
  }
  void TearDown() override {
    for (const std::string& name : created_) Sh(kSparkctl + " sim destroy --name " + name);
  }
  // Creates, discovers and cables a cluster; returns its inventory.
  std::string Cluster(const std::string& name, int nodes, const std::string& topology) {
    Sh(kSparkctl + " sim destroy --name " + name);
    Output created = Sh(kSparkctl + " sim create --name " + name + " --nodes " +
                        std::to_string(nodes) + " --topology " + topology);
    EXPECT_EQ(created.exit_code, 0) << created.out;
    created_.push_back(name);
    const std::string seed = "/run/sparkctl-sim/" + name + "/cluster.yaml";
    Output discover = Sh(kSparkctl + " discover -c " + seed);
    EXPECT_EQ(discover.exit_code, 0) << discover.out;
    Output apply = Sh(kSparkctl + " net apply -c " + seed + " --yes");
    EXPECT_EQ(apply.exit_code, 0) << apply.out;
    return seed;
  }
  // The pid of spark-bench running in node `rank`'s network namespace, or -1: only processes
  // of this cluster's namespace, never one of another cluster on the same host.
  int BenchPid(const std::string& name, int rank) {
    Output pids = Sh("ip netns pids sparksim-" + name + "-spark-" + std::to_string(rank));
    std::istringstream in(pids.out);
    for (int pid; in >> pid;) {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
      std::string what;
      std::getline(comm, what);
      if (what == "spark-bench") return pid;
    }
    return -1;
  }
  // Starts a long 4 KiB all-reduce in the background; its output goes to `log`.
  void StartLongRun(const std::string& seed, const std::string& log, int collective_timeout_s) {
    Output started = Sh(kSparkctl + " bench allreduce -c " + seed +
                        " --transport oneshot -b 4K -e 4K -w 1 -n 100000000 --collective-timeout " +
                        std::to_string(collective_timeout_s) + " > " + log + " 2>&1 & echo $!");
    sparkctl_pid_ = std::stoi(started.out);
  }
  // Waits for the background sparkctl to exit; its exit status, or -1 after `limit`.
  int WaitSparkctl(std::chrono::seconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (kill(sparkctl_pid_, 0) != 0) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  // One-shot connections node `rank` holds (its ssh sessions left out).
  int Links(const std::string& name, int rank) {
    Output n = Sh("ip netns exec sparksim-" + name + "-spark-" + std::to_string(rank) +
                  " ss -Htn state established '( not sport = :22 )' | wc -l");
    return n.exit_code == 0 ? std::atoi(n.out.c_str()) : 0;
  }
  // Waits until every node of the `nodes`-ring runs spark-bench and node `rank` is linked to
  // both its neighbours, so that what the test does next hits a running collective, not the
  // set-up (a slow host starts the last rank seconds after the first); the pid of node `rank`'s
  // spark-bench, or -1.
  int WaitForBench(const std::string& name, int rank, int nodes = 4) {
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      bool all = true;
      for (int r = 0; r < nodes && all; ++r) all = BenchPid(name, r) > 0;
      if (all && Links(name, rank) >= 2) {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        return BenchPid(name, rank);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

  std::vector<std::string> created_;
  int sparkctl_pid_ = -1;
};

TEST_F(OneShotSimTest, SumsAreExactOnAPairAndOnRingsOfThreeFourAndEight) {
  for (auto [nodes, topology] : {std::pair{2, "pair"}, std::pair{3, "ring"},
                                 std::pair{4, "ring"}, std::pair{8, "ring"}}) {
    const std::string name = "os" + std::to_string(nodes);
    const std::string seed = Cluster(name, nodes, topology);
    Output run = Sh(kSparkctl + " bench allreduce -c " + seed +
                    " --transport oneshot -b 4 -e 256K -f 4 -n 5 --check 1 2>&1");
    EXPECT_EQ(run.exit_code, 0) << run.out;
    EXPECT_NE(run.out.find("# Out of bounds values : 0 OK"), std::string::npos) << run.out;
    const std::string kind = nodes == 2 ? "(mesh)" : "(ring)";
    EXPECT_NE(run.out.find("oneshot over socket " + kind), std::string::npos) << run.out;
    // Every size was checked: nine rows of 4 B .. 256 KiB, none with a wrong element.
    EXPECT_NE(run.out.find("      262144         65536     float     sum"), std::string::npos)
        << run.out;
    Output gather = Sh(kSparkctl + " bench allgather -c " + seed +
                       " --transport oneshot -b 1K -e 64K -f 8 -n 3 --check 1 2>&1");
    EXPECT_EQ(gather.exit_code, 0) << gather.out;
    std::cerr << run.out;
    Sh(kSparkctl + " sim destroy --name " + name);
  }
}

TEST_F(OneShotSimTest, AKilledRankIsNamedWithinTheBoundAndAStalledOneAfterTheTimeout) {
  const std::string name = "osk4";
  const std::string seed = Cluster(name, 4, "ring");
  const std::string log = "/run/sparkctl-sim/" + name + "/killed.log";
  // Killed: its neighbours see the connections drop and tell the others at once, long before
  // the 60 s collective timeout.
  StartLongRun(seed, log, 60);
  const int victim = WaitForBench(name, 2);
  ASSERT_GT(victim, 0) << Sh("cat " + log).out;
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const auto killed_at = Clock::now();
  ASSERT_EQ(WaitSparkctl(std::chrono::seconds(30)), 0) << "sparkctl still running";
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const std::string out = Sh("cat " + log).out;
  EXPECT_LT(seconds, 20.0) << out;
  EXPECT_NE(out.find("rank 2 exited or was killed"), std::string::npos) << out;
  std::cerr << out;

  // Stalled: stopped, its connections stay up; the others name it once the 4 s bound passes
  // and exit. (sparkctl itself waits for every rank's command, so it ends once the stopped
  // rank is killed.)
  const std::string stall_log = "/run/sparkctl-sim/" + name + "/stalled.log";
  StartLongRun(seed, stall_log, 4);
  const int stalled = WaitForBench(name, 2);
  ASSERT_GT(stalled, 0) << Sh("cat " + stall_log).out;
  std::vector<int> others;
  for (int r : {0, 1, 3}) others.push_back(BenchPid(name, r));
  ASSERT_EQ(kill(stalled, SIGSTOP), 0);
  const auto stopped_at = Clock::now();
  auto alive = [&] {
    int n = 0;
    for (int pid : others) n += pid > 0 && kill(pid, 0) == 0;
    return n;
  };
  while (alive() > 0 && Clock::now() - stopped_at < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double waited = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  kill(stalled, SIGKILL);
  kill(stalled, SIGCONT);
  ASSERT_EQ(alive(), 0) << "ranks 0, 1 and 3 still wait for the stalled rank";
  ASSERT_EQ(WaitSparkctl(std::chrono::seconds(30)), 0) << "sparkctl still running";
  const std::string stall_out = Sh("cat " + stall_log).out;
  EXPECT_GE(waited, 3.5) << stall_out;
  EXPECT_LT(waited, 20.0) << stall_out;
  // The stalled rank is named: as the source whose slice never came, or as the relay of a
  // slice that never came (which one a rank reports first depends on where it waits).
  EXPECT_TRUE(stall_out.find("nothing from rank 2") != std::string::npos ||
              stall_out.find("(relayed through rank 2)") != std::string::npos)
      << stall_out;
  std::cerr << stall_out;
}

}  // namespace
