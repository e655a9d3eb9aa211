#include "sparkctl/dashboard/snapshot.h"

#include <gtest/gtest.h>

#include "tests/sparkctl/up/up_test_util.h"

namespace spark::dashboard {
namespace {

using nlohmann::ordered_json;
using up::testing::DemoProfile;
using up::testing::ProbeText;
using up::testing::Ring;

// ProbeText with the sections the dashboard adds: more of meminfo, link details, the GPU.
std::string WithExtras(std::string text, uint64_t drops, const std::string& gpu,
                       const std::string& link1 = "up") {
  const std::string extra =
      "SwapTotal:      16777212 kB\nSwapFree:       16252924 kB\nCached:          3981256 kB\n"
      "CmaFree:          524288 kB\n";
  text.insert(text.find("@@links"), extra);
  if (link1 != "up") {
    const size_t at = text.find("enp1s0f1np1 up");
    text.replace(at, 14, "enp1s0f1np1 " + link1);
  }
  const std::string info = "@@linkinfo\nenp1s0f0np0 speed 200000\nenp1s0f0np0 mtu 9000\n"
                           "enp1s0f0np0 rx_dropped " + std::to_string(drops) +
                           "\nenp1s0f0np0 out_of_sequence 7\nenp1s0f1np1 speed -1\n"
                           "enp1s0f1np1 mtu 1500\n@@gpu\n" + gpu;
  text.insert(text.find("@@now"), info);
  return text;
}

std::string Metrics(double gen_tokens, double ttft_bucket_05) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "@@metrics\nvllm:num_requests_running{model_name=\"m\"} 2.0\n"
                "vllm:num_requests_waiting{model_name=\"m\"} 1.0\n"
                "vllm:generation_tokens_total{model_name=\"m\"} %.1f\n"
                "vllm:prompt_tokens_total{model_name=\"m\"} 40.0\n"
                "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"
                "vllm:prefix_cache_queries_total{model_name=\"m\"} 10.0\n"
                "vllm:prefix_cache_hits_total{model_name=\"m\"} 4.0\n"
                "vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} %.1f\n"
                "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} %.1f\n",
                gen_tokens, ttft_bucket_05, ttft_bucket_05);
  return buf;
}

// The status file of `rank` with step counters.
std::string WithSteps(std::string text, int rank, int steps) {
  const std::string key = "\"updated\":";
  const size_t at = text.find(key);
  text.insert(at, "\"steps\":" + std::to_string(steps) + ",\"tokens\":" + std::to_string(steps * 3) +
                      ",\"busy\":true,\"progressed\":1001.5,");
  (void)rank;
  return text;
}

ordered_json Link(const ordered_json& node, const std::string& device) {
  for (const auto& l : node["links"]) {
    if (l["device"] == device) return l;
  }
  ADD_FAILURE() << "no link " << device;
  return ordered_json::object();
}

class SnapshotTest : public ::testing::Test {
 protected:
  SnapshotTest() : plan_(*up::PlanLaunch(DemoProfile(), Ring(), {})) {}

  TickInput Tick(double t, uint64_t drops, int steps, double gen, const std::string& link1 = "up",
                 char rank1_state = 'S') {
    TickInput in;
    in.time = t;
    in.plan = &plan_;
    for (int r = 0; r < 4; ++r) {
      std::string text = ProbeText(r, 100 + r, r == 1 ? rank1_state : 'S', "ready", 1000,
                                   r == 0, 200, r == 0 ? Metrics(gen, gen / 10) : "");
      text = WithSteps(WithExtras(text, drops, r == 0 ? "37, 55, 2405, 12.5\n" : "",
                                  r == 2 ? link1 : "up"),
                       r, steps);
      auto p = up::ParseProbe("spark-" + std::to_string(r), text);
      EXPECT_TRUE(p.ok()) << p.status().message();
      in.probes.push_back(*p);
    }
    in.health = up::Assess(plan_, in.probes);
    return in;
  }

  up::LaunchPlan plan_;
};

TEST_F(SnapshotTest, StatusIsStatusJsonOfTheSameProbes) {
  SnapshotBuilder b;
  TickInput in = Tick(2000, 10, 10, 100);
  ordered_json s = b.Build(in);
  ordered_json expected = up::StatusJson(plan_, in.probes, in.health);
  expected["restarts"] = 0;
  EXPECT_EQ(s["status"], expected);
  EXPECT_EQ(s["schema"], kSnapshotSchema);
  ASSERT_EQ(s["nodes"].size(), 4u);
  const ordered_json& n0 = s["nodes"][0];
  EXPECT_EQ(n0["mem_available_kib"], 100000000);
  EXPECT_EQ(n0["swap_used_kib"], 16777212 - 16252924);
  EXPECT_EQ(n0["page_cache_kib"], 3981256);
  EXPECT_EQ(n0["cma_free_kib"], 524288);
  EXPECT_EQ(n0["gpu"]["temperature_c"], 55.0);
  EXPECT_EQ(n0["gpu"]["sm_clock_mhz"], 2405.0);
  EXPECT_TRUE(s["nodes"][1]["gpu"].is_null());  // no nvidia-smi answer: n/a
  // Absent netdevs are left out; speed -1 (a link down) is unknown.
  ASSERT_EQ(n0["links"].size(), 3u);
  EXPECT_EQ(Link(n0, "enp1s0f0np0")["speed_mbps"], 200000);
  EXPECT_EQ(Link(n0, "enp1s0f0np0")["mtu"], 9000);
  EXPECT_TRUE(Link(n0, "enp1s0f1np1")["speed_mbps"].is_null());
  EXPECT_EQ(s["ranks"][2]["phase"], "ready");
  EXPECT_EQ(s["ranks"][2]["busy"], true);
  EXPECT_EQ(s["ranks"][2]["progress_age_s"], 1.0);  // node clock 1002.5, progressed 1001.5
}

TEST_F(SnapshotTest, RatesAndStepTimesComeFromTwoTicks) {
  SnapshotBuilder b;
  ordered_json first = b.Build(Tick(2000, 10, 10, 100));
  EXPECT_TRUE(Link(first["nodes"][0], "enp1s0f0np0")["rates"]["rx_dropped"].is_null());
  EXPECT_TRUE(first["endpoint"]["generation_tokens_per_s"].is_null());
  ordered_json s = b.Build(Tick(2002, 110, 14, 160));
  const ordered_json link = Link(s["nodes"][0], "enp1s0f0np0");
  EXPECT_DOUBLE_EQ(link["rates"]["rx_dropped"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(link["rates"]["out_of_sequence"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["ranks"][0]["step_time_ms"].get<double>(), 500.0);  // 4 steps in 2 s
  const ordered_json& e = s["endpoint"];
  EXPECT_DOUBLE_EQ(e["generation_tokens_per_s"].get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(e["prompt_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(e["running"], 2.0);
  EXPECT_EQ(e["waiting"], 1.0);
  EXPECT_EQ(e["kv_cache_usage"], 0.25);
  EXPECT_TRUE(e["prefix_cache_hit_rate"].is_null());  // no queries within the window
  EXPECT_TRUE(e["spec_acceptance"].is_null());        // no drafter: not running
  EXPECT_DOUBLE_EQ(e["ttft_seconds"]["p50"].get<double>(), 0.25);  // 6 new, all <= 0.5
}

TEST_F(SnapshotTest, EventsNameRankExitsRestartsAndLinkChanges) {
  SnapshotBuilder b;
  ordered_json before = b.Build(Tick(2000, 10, 10, 100));
  TickInput in = Tick(2001, 10, 11, 110, "down", 'T');
  in.restarts = 1;
  ordered_json after = b.Build(in);
  std::vector<ordered_json> events = DiffEvents(before, after);
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e["kind"]);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "restart"), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "health"), kinds.end());
  bool rank = false, fabric = false;
  for (const auto& e : events) {
    const std::string text = e["text"];
    if (e["kind"] == "rank") rank = text.find("rank 1 (spark-1) ready -> hung") == 0;
    if (e["kind"] == "fabric") fabric = text == "spark-2 enp1s0f1np1 up -> down";
    EXPECT_EQ(e["time"], 2001.0);
  }
  EXPECT_TRUE(rank);
  EXPECT_TRUE(fabric);
  EXPECT_TRUE(DiffEvents(after, after).empty());
}

TEST_F(SnapshotTest, NothingRunningIsADownSnapshot) {
  SnapshotBuilder b;
  TickInput in;
  in.time = 5;
  in.down_reason = "nothing runs on this cluster";
  ordered_json s = b.Build(in);
  EXPECT_EQ(s["status"]["health"], "down");
  EXPECT_TRUE(s["nodes"].empty());
  ordered_json row = HistoryRow(s);
  EXPECT_EQ(row["t"], 5.0);
  EXPECT_TRUE(row["gen_tps"].is_null());
}

}  // namespace
}  // namespace spark::dashboard
