// Link probes over loopback TCP (server thread + probe) and the latency percentiles.
#include "sparkctl/bench/link_probe.h"

#include <gtest/gtest.h>

#include <thread>

#include "sparkctl/bench/link_stats.h"

namespace spark::bench {
namespace {

TEST(LinkStatsTest, NearestRankPercentiles) {
  std::vector<double> s;
  for (int i = 100; i >= 1; --i) s.push_back(i);  // 1..100, unsorted
  LatencySummary l = Summarize(s);
  EXPECT_EQ(l.p50_us, 50);  // rank ceil(0.5*100) = 50
  EXPECT_EQ(l.p99_us, 99);  // rank 99
  EXPECT_EQ(l.samples, 100);
  LatencySummary three = Summarize({5, 1, 3});
  EXPECT_EQ(three.p50_us, 3);  // rank ceil(1.5) = 2
  EXPECT_EQ(three.p99_us, 5);  // rank ceil(2.97) = 3
  EXPECT_EQ(Summarize({}).samples, 0);
}

TEST(LinkProbeTest, TcpOverLoopbackSaysTcp) {
  LinkProbeOptions o;
  o.bind = "127.0.0.1";
  o.peer = "127.0.0.1";
  o.port = 29791;
  o.duration = std::chrono::milliseconds(200);
  o.pingpongs = 50;
  o.size = 64 << 10;
  Status served;
  std::thread server([&] { served = ServeLink(o); });
  auto r = ProbeLink(o);
  server.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_EQ(r->transport, "tcp");
  EXPECT_EQ(r->latency.samples, 50);
  EXPECT_GT(r->latency.p50_us, 0);
  EXPECT_GE(r->latency.p99_us, r->latency.p50_us);
  EXPECT_GT(r->bytes, 0u);
  EXPECT_NEAR(r->gbps, r->bytes * 8 / 1e9 / r->seconds, 1e-9);
  auto back = LinkProbeResultFromJson(ToJson(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->transport, "tcp");
}

TEST(LinkProbeTest, ServerWithoutProbeTimesOut) {
  LinkProbeOptions o;
  o.bind = "127.0.0.1";
  o.port = 29792;
  o.accept_timeout = std::chrono::seconds(1);
  Status s = ServeLink(o);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
}

}  // namespace
}  // namespace spark::bench
