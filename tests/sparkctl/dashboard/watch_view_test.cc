#include "sparkctl/dashboard/watch_view.h"

#include <gtest/gtest.h>

namespace spark::dashboard {
namespace {

TEST(WatchViewTest, ShowsNodesRanksEndpointAndTheLastEvents) {
  auto s = nlohmann::ordered_json::parse(R"({
    "time": 10, "status": {"model": "m", "health": "degraded", "endpoint": "http://x",
                           "reason": "rank 1 (spark-1): no heartbeat for 7 s"},
    "nodes": [{"node": "spark-0", "reachable": true, "mem_total_kib": 2097152,
               "mem_available_kib": 1048576, "swap_used_kib": 0, "page_cache_kib": null,
               "cma_free_kib": 524288, "gpu": null,
               "links": [{"device": "enp1s0f0np0", "state": "up", "speed_mbps": 200000, "mtu": 9000,
                          "rates": {}}]}],
    "ranks": [{"rank": 1, "node": "spark-1", "phase": "hung", "busy": true, "hung": true,
               "steps": 5, "step_time_ms": null, "progress_age_s": 130}],
    "endpoint": {"ready": false, "running": 1, "waiting": 0, "generation_tokens_per_s": 12.5,
                 "ttft_seconds": {"p50": 0.25, "p90": null, "p99": null}, "kv_cache_usage": 0.5}
  })");
  auto events = nlohmann::ordered_json::array();
  for (int i = 0; i < 7; ++i) {
    events.push_back({{"time", 10}, {"kind", "rank"}, {"text", "event " + std::to_string(i)}});
  }
  const std::string text = RenderWatch(s, events, 5);
  EXPECT_NE(text.find("1.0/2.0"), std::string::npos) << text;  // MemAvailable of MemTotal, GiB
  EXPECT_NE(text.find("0.50"), std::string::npos) << text;     // CMA free, GiB
  EXPECT_NE(text.find("n/a"), std::string::npos) << text;      // no GPU, no page cache
  EXPECT_NE(text.find("enp1s0f0np0:up/200000M/9000"), std::string::npos) << text;
  EXPECT_NE(text.find("HUNG"), std::string::npos) << text;
  EXPECT_NE(text.find("130 s"), std::string::npos) << text;
  EXPECT_NE(text.find("generation 12.5 tok/s"), std::string::npos) << text;
  EXPECT_NE(text.find("TTFT p50/p90/p99 250/n/a/n/a ms"), std::string::npos) << text;
  EXPECT_NE(text.find("KV cache 50.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("DEGRADED: rank 1 (spark-1): no heartbeat"), std::string::npos) << text;
  EXPECT_EQ(text.find("event 1\n"), std::string::npos) << text;  // only the last five
  EXPECT_NE(text.find("event 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("event 6\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace spark::dashboard
