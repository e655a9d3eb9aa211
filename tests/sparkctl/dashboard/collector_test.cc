#include "sparkctl/dashboard/collector.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "sparkctl/ssh/testing/fake_transport.h"
#include "sparkctl/up/state_file.h"
#include "tests/sparkctl/up/up_test_util.h"

namespace spark::dashboard {
namespace {

using up::testing::ProbeText;

class CollectorTest : public ::testing::Test {
 protected:
  CollectorTest() {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("dashboard-collector-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  ~CollectorTest() override { std::filesystem::remove_all(dir_); }

  void SaveState(int restarts) {
    up::UpState s;
    s.plan = *up::PlanLaunch(up::testing::DemoProfile(), up::testing::Ring(), {});
    s.restarts = restarts;
    ASSERT_TRUE(up::SaveState(dir_, s).ok());
  }
  void Answer(int rank, char state) {
    fake_.Reply("spark-" + std::to_string(rank), "[\\s\\S]*",
                ProbeText(rank, 100 + rank, state, "ready", 1000, rank == 0, 200,
                          rank == 0 ? "@@metrics\nvllm:num_requests_running 1.0\n" : ""));
  }

  std::string dir_;
  ssh::testing::FakeTransport fake_;
};

TEST_F(CollectorTest, TicksThroughStatusProbesAndLogsWhatChanged) {
  SaveState(0);
  for (int r = 0; r < 4; ++r) Answer(r, 'S');
  History history;
  Collector c(fake_, dir_, history);
  c.Tick();
  nlohmann::ordered_json s = history.Latest();
  ASSERT_EQ(s["nodes"].size(), 4u);
  EXPECT_EQ(s["status"]["health"], "ready");
  EXPECT_EQ(s["endpoint"]["running"], 1.0);
  EXPECT_EQ(history.LatestEngineMetrics(), "vllm:num_requests_running 1.0\n");
  // One probe per node: `status`'s own command, with /metrics read once on rank 0's node.
  for (int r = 0; r < 4; ++r) {
    auto commands = fake_.CommandsOn("spark-" + std::to_string(r));
    ASSERT_EQ(commands.size(), 1u);
    EXPECT_NE(commands[0].find("@@kernel"), std::string::npos);
  }
  EXPECT_EQ(fake_.CommandsOn("spark-0")[0].find("sleep 1"), std::string::npos);
  const CollectorCost cost = c.cost();
  EXPECT_EQ(cost.ticks, 1u);
  EXPECT_GT(cost.bytes_sent, 1000u);
  EXPECT_GT(cost.bytes_received, 1000u);

  Answer(2, 'T');  // rank 2 stopped
  SaveState(1);
  c.Tick();
  s = history.Latest();
  EXPECT_EQ(s["ranks"][2]["phase"], "hung");
  EXPECT_EQ(s["status"]["health"], "degraded");
  bool rank_event = false, restart_event = false;
  for (const auto& e : history.Events()) {
    rank_event |= e["kind"] == "rank" &&
                  e["text"].get<std::string>().find("rank 2 (spark-2) ready -> hung") == 0;
    restart_event |= e["kind"] == "restart";
  }
  EXPECT_TRUE(rank_event);
  EXPECT_TRUE(restart_event);
  EXPECT_EQ(history.Rows().size(), 2u);
}

TEST_F(CollectorTest, NoStateIsADownSnapshotNotAnError) {
  History history;
  Collector c(fake_, dir_, history);
  c.Tick();
  EXPECT_EQ(history.Latest()["status"]["health"], "down");
  EXPECT_TRUE(fake_.calls().empty());
}

TEST(HistoryTest, KeepsTheLastRowsAndEvents) {
  History h(/*max_rows=*/3, /*max_events=*/2);
  for (int i = 0; i < 5; ++i) {
    nlohmann::ordered_json s = {{"time", i}, {"status", {{"health", "down"}}},
                                {"nodes", nlohmann::ordered_json::array()},
                                {"ranks", nlohmann::ordered_json::array()}};
    h.Add(s, "", {{{"time", i}, {"kind", "node"}, {"text", std::to_string(i)}}});
  }
  ASSERT_EQ(h.Rows().size(), 3u);
  EXPECT_EQ(h.Rows()[0]["t"], 2.0);
  ASSERT_EQ(h.Events().size(), 2u);
  EXPECT_EQ(h.Events()[1]["text"], "4");
  std::vector<std::string> got;
  const int id = h.Listen([&](const std::string& m) { got.push_back(m); });
  h.Add(h.Latest(), "", {});
  h.Unlisten(id);
  h.Add(h.Latest(), "", {});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("event: tick\ndata: {", 0), 0u);
  EXPECT_EQ(got[0].substr(got[0].size() - 2), "\n\n");
}

// Preflight on its own cadence: a check turning warn or fail is an event at the next tick (with
// what was seen and the fix), an unchanged finding is not repeated, and one that clears says so.
TEST_F(CollectorTest, PreflightFindingsThatChangeAreEvents) {
  SaveState(0);
  for (int r = 0; r < 4; ++r) Answer(r, 'S');
  std::vector<host::CheckResult> results = {
      {"CMA.NONZERO", "spark-1", host::Verdict::kFail, "cma=0", "add cma=512M to the kernel line"},
      {"MEMLOCK.UNLIMITED", "spark-2", host::Verdict::kOk, "unlimited", ""}};
  int passes = 0;
  CollectorOptions options;
  options.preflight = [&] {
    ++passes;
    return results;
  };
  History history;
  Collector c(fake_, dir_, history, options);
  auto preflight_events = [&] {
    std::vector<std::string> out;
    for (const auto& e : history.Events()) {
      if (e["kind"] == "preflight") out.push_back(e["text"]);
    }
    return out;
  };
  c.Tick();
  c.Preflight();
  EXPECT_TRUE(preflight_events().empty()) << "events wait for the next tick";
  c.Tick();
  ASSERT_EQ(preflight_events().size(), 1u);
  EXPECT_EQ(preflight_events()[0],
            "preflight CMA.NONZERO fail on spark-1: cma=0 (fix: add cma=512M to the kernel line)");
  c.Preflight();  // the same finding: nothing new
  c.Tick();
  EXPECT_EQ(preflight_events().size(), 1u);
  results[0].verdict = host::Verdict::kOk;
  results[1] = {"MEMLOCK.UNLIMITED", "spark-2", host::Verdict::kWarn, "65536", "set memlock"};
  c.Preflight();
  c.Tick();
  const std::vector<std::string> all = preflight_events();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1], "preflight MEMLOCK.UNLIMITED warn on spark-2: 65536 (fix: set memlock)");
  EXPECT_EQ(all[2], "preflight CMA.NONZERO ok again on spark-1");
  EXPECT_EQ(passes, 3);
}

}  // namespace
}  // namespace spark::dashboard
