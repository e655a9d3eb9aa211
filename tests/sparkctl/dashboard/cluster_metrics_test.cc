#include "sparkctl/dashboard/cluster_metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "sparkctl/dashboard/prometheus_text.h"

namespace spark::dashboard {
namespace {

using nlohmann::ordered_json;

ordered_json Snapshot() {
  return ordered_json::parse(R"({
    "schema": "sparkctl-dashboard/v1", "time": 10,
    "status": {"health": "ready", "endpoint_node": "spark-0", "restarts": 2},
    "nodes": [
      {"node": "spark-0", "reachable": true, "mem_total_kib": 2048, "mem_available_kib": 1024,
       "swap_used_kib": 0, "page_cache_kib": 512, "cma_free_kib": null,
       "gpu": {"utilization_percent": 50, "temperature_c": 40, "sm_clock_mhz": 2405, "power_w": null},
       "links": [{"device": "enp1s0f0np0", "state": "up", "speed_mbps": 200000, "mtu": 9000,
                  "rates": {"rx_dropped": 1.5, "out_of_sequence": null}}]},
      {"node": "spark-1", "reachable": false, "gpu": null, "links": []}],
    "ranks": [{"rank": 1, "node": "spark-1", "phase": "exited", "busy": false, "hung": false,
               "steps": 7, "tokens": 9, "step_time_ms": 250, "progress_age_s": null}]
  })");
}

double Value(const MetricsBody& b, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  for (const Sample& s : b.samples()) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) match = match && s.labels.count(k) && s.labels.at(k) == v;
    if (match) return s.value;
  }
  ADD_FAILURE() << "no sample " << name;
  return -1;
}

TEST(ClusterMetricsTest, NodeLinkAndRankSeriesCarryTheirLabels) {
  const std::string text = RenderClusterMetrics(Snapshot(), "");
  MetricsBody b(text);
  EXPECT_EQ(Value(b, "sparkctl_node_memory_available_bytes", {{"node", "spark-0"}}), 1024 * 1024);
  EXPECT_EQ(Value(b, "sparkctl_node_up", {{"node", "spark-1"}}), 0);
  EXPECT_EQ(Value(b, "sparkctl_node_gpu_sm_clock_hertz", {{"node", "spark-0"}}), 2405e6);
  EXPECT_EQ(Value(b, "sparkctl_link_counter_rate",
                  {{"node", "spark-0"}, {"device", "enp1s0f0np0"}, {"counter", "rx_dropped"}}),
            1.5);
  EXPECT_EQ(Value(b, "sparkctl_rank_phase", {{"rank", "1"}, {"phase", "exited"}}), 1);
  EXPECT_EQ(Value(b, "sparkctl_rank_step_time_seconds", {{"rank", "1"}, {"node", "spark-1"}}),
            0.25);
  EXPECT_EQ(Value(b, "sparkctl_model_restarts_total", {}), 2);
  // n/a values are left out, not written as 0.
  EXPECT_EQ(text.find("sparkctl_node_cma_free_bytes"), std::string::npos);
  EXPECT_EQ(text.find("sparkctl_node_gpu_power_watts"), std::string::npos);
  EXPECT_EQ(text.find("counter=\"out_of_sequence\""), std::string::npos);
  // One HELP and TYPE per family.
  EXPECT_EQ(text.find("# TYPE sparkctl_node_up gauge"), text.rfind("# TYPE sparkctl_node_up gauge"));
}

TEST(ClusterMetricsTest, EngineSeriesGetNodeAndRankLabels) {
  const std::string engine =
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3.0\n"
      "spark:plain 4\n"
      "spark:empty{} 5\n";
  MetricsBody b(RenderClusterMetrics(Snapshot(), engine));
  EXPECT_EQ(Value(b, "vllm:num_requests_running",
                  {{"node", "spark-0"}, {"rank", "0"}, {"model_name", "m"}}),
            3.0);
  EXPECT_EQ(Value(b, "spark:plain", {{"node", "spark-0"}, {"rank", "0"}}), 4.0);
  EXPECT_EQ(Value(b, "spark:empty", {{"node", "spark-0"}, {"rank", "0"}}), 5.0);
  EXPECT_EQ(AddLabels("# HELP x y\n", "a=\"b\""), "# HELP x y\n");
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every series the committed Grafana dashboard queries exists: ours in a full render, the
// engine's in the engine's metrics source.
TEST(ClusterMetricsTest, GrafanaDashboardQueriesSeriesThatExist) {
  ordered_json full = Snapshot();
  full["nodes"][0]["cma_free_kib"] = 1;
  full["nodes"][0]["gpu"]["power_w"] = 1;
  full["ranks"][0]["progress_age_s"] = 1;
  full["ranks"][0]["hung"] = true;
  const std::string ours = RenderClusterMetrics(full, "");
  const std::string engine = ReadFile(SPARK_SOURCE_DIR "/engine/server/metrics.cc");
  const std::string dashboard = ReadFile(SPARK_SOURCE_DIR "/docs/grafana-dashboard.json");
  ASSERT_FALSE(dashboard.empty());
  ASSERT_TRUE(ordered_json::accept(dashboard));
  const std::regex name(R"(\b(sparkctl_[a-z_]+|vllm:[a-z_]+))");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), name);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
  }
  EXPECT_GT(names.size(), 15u);
  for (std::string n : names) {
    if (n.starts_with("sparkctl_")) {
      EXPECT_NE(ours.find("\n" + n + "{"), std::string::npos) << n;
    } else {
      for (const char* suffix : {"_bucket", "_total"}) {
        if (n.ends_with(suffix)) n = n.substr(0, n.size() - std::string(suffix).size());
      }
      EXPECT_NE(engine.find("\"" + n), std::string::npos) << n;
    }
  }
}

}  // namespace
}  // namespace spark::dashboard
