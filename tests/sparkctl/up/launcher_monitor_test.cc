// The launcher and the monitor against FakeTransport nodes that behave like engine ranks:
// start writes a pidfile, stop ends the rank, the probe reports what runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <vector>

#include "sparkctl/ssh/testing/fake_transport.h"
#include "sparkctl/up/launcher.h"
#include "sparkctl/up/monitor.h"
#include "sparkctl/up/up.h"
#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

// Four fake nodes, one rank each, that become ready as soon as they start.
class FakeRanks {
 public:
  explicit FakeRanks(ssh::testing::FakeTransport& fake) : fake_(fake) {
    fake.Reply("*", "test -d /run/systemd/system", "", 1);
    for (int r = 0; r < 4; ++r) {
      const std::string node = "spark-" + std::to_string(r);
      fake.OnCommand(node, "[\\s\\S]*setsid -f[\\s\\S]*", Handler(r, &FakeRanks::Start));
      fake.OnCommand(node, "[\\s\\S]*kill -TERM[\\s\\S]*", Handler(r, &FakeRanks::Stop));
      fake.OnCommand(node, "echo @@kernel[\\s\\S]*", Handler(r, &FakeRanks::Probe));
    }
  }
  void Kill(int rank) {
    std::lock_guard<std::mutex> l(mu_);
    alive_[rank] = false;
  }
  int pid(int rank) {
    std::lock_guard<std::mutex> l(mu_);
    return pid_[rank];
  }
  int starts() {
    std::lock_guard<std::mutex> l(mu_);
    return starts_;
  }
  // Called (outside the lock) as each rank starts.
  void OnStart(std::function<void(int rank)> f) {
    std::lock_guard<std::mutex> l(mu_);
    on_start_ = std::move(f);
  }

 private:
  using Method = ssh::CommandResult (FakeRanks::*)(int);
  ssh::testing::FakeTransport::Handler Handler(int rank, Method m) {
    return [this, rank, m](const std::string&, const std::string&) -> Result<ssh::CommandResult> {
      return (this->*m)(rank);
    };
  }
  ssh::CommandResult Ok(std::string out) {
    ssh::CommandResult r;
    r.exit_code = 0;
    r.stdout_data = std::move(out);
    return r;
  }
  ssh::CommandResult Start(int rank) {
    int pid;
    std::function<void(int)> on_start;
    {
      std::lock_guard<std::mutex> l(mu_);
      pid = pid_[rank] = next_pid_++;
      alive_[rank] = true;
      ++starts_;
      on_start = on_start_;
    }
    if (on_start) on_start(rank);
    fake_.SetFile("spark-" + std::to_string(rank),
                  "/run/sparkctl/up/demo/rank" + std::to_string(rank) + ".pid",
                  std::to_string(pid) + "\n");
    return Ok("");
  }
  ssh::CommandResult Stop(int rank) {
    std::lock_guard<std::mutex> l(mu_);
    const bool was = alive_[rank];
    alive_[rank] = false;
    return Ok(was ? "stopped " + std::to_string(pid_[rank]) + "\n" : "not running\n");
  }
  ssh::CommandResult Probe(int rank) {
    std::lock_guard<std::mutex> l(mu_);
    const bool any = pid_[rank] > 0;
    return Ok(testing::ProbeText(rank, pid_[rank], alive_[rank] ? 'S' : 0, any ? "ready" : "",
                                 1000, rank == 0, alive_[0] ? 200 : 0));
  }

  ssh::testing::FakeTransport& fake_;
  std::mutex mu_;
  int pid_[4] = {0, 0, 0, 0};
  bool alive_[4] = {false, false, false, false};
  int next_pid_ = 100;
  int starts_ = 0;
  std::function<void(int)> on_start_;
};

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("up-launcher-" + std::to_string(getpid())))
               .string();
    std::filesystem::remove_all(dir_);
    plan_ = *PlanLaunch(testing::DemoProfile(), testing::Ring(), {});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts every rank and records them in the state, as up does.
  void StartAndRecord() {
    auto started = StartRanks(fake_, plan_);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    UpState state;
    state.plan = plan_;
    for (const auto& s : *started) state.pids[s.rank] = s.pid;
    ASSERT_TRUE(SaveState(dir_, state).ok());
  }
  // A monitor that restarts at once and polls a few times, fast.
  static MonitorOptions QuickMonitor(std::function<void(const std::string&)> log) {
    MonitorOptions m;
    m.poll = std::chrono::milliseconds(10);
    m.grace = std::chrono::milliseconds(0);
    m.max_polls = 6;
    m.log = std::move(log);
    return m;
  }

  ssh::testing::FakeTransport fake_;
  FakeRanks ranks_{fake_};
  LaunchPlan plan_;
  std::string dir_;
};

TEST_F(LauncherTest, StartsEveryRankOnItsNodeAndReadsItsPid) {
  auto started = StartRanks(fake_, plan_);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ(started->size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ((*started)[r].rank, r);
    EXPECT_EQ((*started)[r].pid, ranks_.pid(r));
    EXPECT_FALSE((*started)[r].systemd);
    const auto cmds = fake_.CommandsOn("spark-" + std::to_string(r));
    bool own = false;
    for (const auto& c : cmds) {
      own |= c.find("setsid -f") != std::string::npos &&
             c.find("/rank" + std::to_string(r) + ".pid") != std::string::npos;
    }
    EXPECT_TRUE(own) << "rank " << r << " started on its own node";
  }
  EXPECT_TRUE(WaitReady(fake_, plan_, {}).ok());
  std::vector<std::string> lines;
  ASSERT_TRUE(StopRanks(fake_, plan_, &lines).ok());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], "rank 1 spark-1: stopped " + std::to_string(ranks_.pid(1)));
}

TEST_F(LauncherTest, WaitReadyStopsEarlyNamingTheDeadRank) {
  ASSERT_TRUE(StartRanks(fake_, plan_).ok());
  ranks_.Kill(3);
  WaitOptions w;
  w.poll = std::chrono::milliseconds(10);
  w.degraded_grace = std::chrono::milliseconds(30);
  int polls = 0;
  w.on_poll = [&](const ClusterHealth&) { ++polls; };
  Status s = WaitReady(fake_, plan_, w);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("rank 3 (spark-3)"), std::string::npos) << s.message();
  EXPECT_GE(polls, 2) << "one bad poll is not enough to give up";
}

TEST_F(LauncherTest, UnreachableNodeFailsTheStartNamingIt) {
  fake_.SetNodeDown("spark-2", UnavailableError("spark-2: unreachable: refused"));
  auto started = StartRanks(fake_, plan_);
  EXPECT_EQ(started.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(started.status().message().find("spark-2"), std::string::npos);
}

TEST_F(LauncherTest, MonitorRestartsTheWholeModelWhenARankDies) {
  ASSERT_NO_FATAL_FAILURE(StartAndRecord());
  const int before = ranks_.pid(0);
  ranks_.Kill(2);
  std::vector<std::string> log;
  ASSERT_TRUE(
      RunMonitor(fake_, dir_, QuickMonitor([&](const std::string& l) { log.push_back(l); })).ok());
  auto after = LoadState(dir_);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->restarts, 1) << "one restart, then ready again";
  EXPECT_EQ(ranks_.starts(), 8) << "all four ranks started again, not only the dead one";
  EXPECT_NE(ranks_.pid(0), before);
  EXPECT_EQ(after->pids.at(0), ranks_.pid(0));
  std::string all;
  for (const auto& l : log) all += l + "\n";
  EXPECT_NE(all.find("degraded: rank 2 (spark-2)"), std::string::npos) << all;
  EXPECT_NE(all.find("restarting the whole model"), std::string::npos) << all;
  EXPECT_NE(all.find("recovered"), std::string::npos) << all;
}

// sparkctl status reads the restart count after probing; a rank that is up again must never
// be seen before its restart is on record (up_e2e_test saw "ready" with 0 restarts otherwise).
TEST_F(LauncherTest, MonitorRecordsTheRestartBeforeAnyRankStartsAgain) {
  ASSERT_NO_FATAL_FAILURE(StartAndRecord());
  std::mutex mu;
  std::vector<int> seen;  // the recorded restart count as each rank starts again
  ranks_.OnStart([&](int) {
    auto now = LoadState(dir_);
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(now.ok() ? now->restarts : -1);
  });
  ranks_.Kill(2);
  ASSERT_TRUE(RunMonitor(fake_, dir_, QuickMonitor([](const std::string&) {})).ok());
  ASSERT_EQ(seen.size(), 4u) << "every rank started once more";
  for (int restarts : seen) EXPECT_EQ(restarts, 1) << "the restart is on record before the start";
  EXPECT_EQ(LoadState(dir_)->restarts, 1);
}

TEST_F(LauncherTest, MonitorLeavesADegradedModelAloneWithoutAutoRecovery) {
  ASSERT_TRUE(StartRanks(fake_, plan_).ok());
  UpState state;
  state.plan = plan_;
  state.auto_recover = false;
  ASSERT_TRUE(SaveState(dir_, state).ok());
  ranks_.Kill(1);
  MonitorOptions m;
  m.poll = std::chrono::milliseconds(5);
  m.grace = std::chrono::milliseconds(0);
  m.max_polls = 4;
  std::string all;
  m.log = [&](const std::string& l) { all += l + "\n"; };
  ASSERT_TRUE(RunMonitor(fake_, dir_, m).ok());
  EXPECT_EQ(ranks_.starts(), 4);
  EXPECT_NE(all.find("degraded: rank 1"), std::string::npos) << all;
  EXPECT_EQ(LoadState(dir_)->restarts, 0);
}

TEST_F(LauncherTest, MonitorStopsWhenDownRemovedTheState) {
  MonitorOptions m;
  m.log = [](const std::string&) {};
  m.max_polls = 100000;
  EXPECT_TRUE(RunMonitor(fake_, dir_, m).ok()) << "no state: returns at once";
}

TEST_F(LauncherTest, DownStopsEveryRankAndForgetsTheModel) {
  auto started = StartRanks(fake_, plan_);
  ASSERT_TRUE(started.ok());
  UpState state;
  state.plan = plan_;
  ASSERT_TRUE(SaveState(dir_, state).ok());
  std::vector<std::string> lines;
  ASSERT_TRUE(Down(fake_, dir_, &lines).ok());
  EXPECT_EQ(lines.size(), 4u);
  EXPECT_EQ(LoadState(dir_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Down(fake_, dir_, &lines).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace spark::up
