// selftest and the cluster all-reduce on a simulated four-node ring, through the real sparkctl
// and spark-bench binaries, real sshd and veth cables: a healthy ring passes, a pulled cable
// fails naming that cable, the control traffic stays on the WireGuard tunnel with the cable
// pulled and falls back to the management LAN (with a warning) when the tunnel is down, and the
// CPU all-reduce over 4 nodes sums exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";

using spark::testing::Output;

Output Sh(const std::string& command) { return spark::testing::Shell(command, /*merge_stderr=*/true); }

class SelftestSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    Sh(kSparkctl + " sim destroy --name " + name_);
    Output created = Sh(kSparkctl + " sim create --name " + name_ + " --nodes 4 --topology ring");
    ASSERT_EQ(created.exit_code, 0) << created.out;
    created_ = true;
  }
  void TearDown() override {
    if (created_) Sh(kSparkctl + " sim destroy --name " + name_);
  }
  std::string Seed() const { return "/run/sparkctl-sim/" + name_ + "/cluster.yaml"; }
  Output Exec(int rank, const std::string& cmd) {
    return Sh(kSparkctl + " sim exec --name " + name_ + " " + std::to_string(rank) + " -- sh -c '" +
              cmd + "'");
  }
  // selftest --json: the verdict of check `id` ("" when absent) and its `seen`.
  std::pair<std::string, std::string> Verdict(const nlohmann::json& j, const std::string& id) {
    for (const auto& c : j["checks"]) {
      if (c["id"] == id) return {c["verdict"], c["seen"]};
    }
    return {"", ""};
  }
  nlohmann::json SelftestJson() {
    Output o = Sh(kSparkctl + " selftest -c " + Seed() + " --json 2>/dev/null");
    nlohmann::json j = nlohmann::json::parse(o.out.substr(std::min(o.out.find('{'), o.out.size())),
                                             nullptr, false);
    if (j.is_discarded()) ADD_FAILURE() << o.out;
    return j;
  }

  std::string name_ = "self4";
  bool created_ = false;
};

TEST_F(SelftestSimTest, RingPassesFailsOnAPulledCableAndAllReducesOnFourNodes) {
  Output discover = Sh(kSparkctl + " discover -c " + Seed() + " --json");
  ASSERT_EQ(discover.exit_code, 0) << discover.out;
  Output apply = Sh(kSparkctl + " net apply -c " + Seed() + " --yes");
  ASSERT_EQ(apply.exit_code, 0) << apply.out;

  Output healthy = Sh(kSparkctl + " selftest -c " + Seed());
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out;
  EXPECT_NE(healthy.out.find("All checks passed."), std::string::npos) << healthy.out;
  // The simulator has no RDMA verbs devices: said plainly, as a warning, with TCP named.
  EXPECT_NE(healthy.out.find("Measurements use TCP sockets instead, not RDMA."), std::string::npos)
      << healthy.out;
  std::cerr << healthy.out;

  Output json = Sh(kSparkctl + " selftest -c " + Seed() + " --json 2>/dev/null");
  nlohmann::json j = nlohmann::json::parse(json.out.substr(json.out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j["schema"], "sparkctl-selftest/v1");
  EXPECT_EQ(j["ok"], true);
  bool allreduce_ok = false;
  for (const auto& c : j["checks"])
    if (c["id"] == "ALLREDUCE.CORRECT") allreduce_ok = c["verdict"] == "ok";
  EXPECT_TRUE(allreduce_ok) << json.out;
  // Every node says which NCCL its engine would load (none in CI, the host's where it has one).
  int nccl_checks = 0;
  for (const auto& c : j["checks"]) {
    if (c["id"] != "NCCL.VERSION") continue;
    ++nccl_checks;
    EXPECT_NE(c["verdict"], "fail") << c.dump();
  }
  EXPECT_EQ(nccl_checks, 4) << json.out;

  // Every cable twin measured; no verbs devices here, so TCP, and the report says so.
  Output link = Sh(kSparkctl + " bench link --cluster " + Seed() + " --seconds 0.2 --json 2>/dev/null");
  EXPECT_EQ(link.exit_code, 0) << link.out;
  nlohmann::json l = nlohmann::json::parse(link.out, nullptr, false);
  ASSERT_FALSE(l.is_discarded()) << link.out;
  EXPECT_EQ(l["ok"], true);
  EXPECT_NE(l["transport_note"].get<std::string>().find("not RDMA"), std::string::npos) << link.out;
  ASSERT_EQ(l["links"].size(), 8u) << link.out;  // 4 cables x 2 twins
  for (const auto& row : l["links"]) {
    EXPECT_EQ(row["result"]["transport"], "tcp") << row.dump();
    EXPECT_GT(row["result"]["latency_us"]["p50"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["result"]["bandwidth_gbps"].get<double>(), 0) << row.dump();
  }
  std::cerr << Sh(kSparkctl + " bench link --cluster " + Seed() + " --seconds 0.2").out;

  // Pull the cable leaving spark-1 port 0 (to spark-2 port 1).
  Output pulled = Sh(kSparkctl + " sim fault --name " + name_ + " unplug spark-1 0");
  ASSERT_EQ(pulled.exit_code, 0) << pulled.out;
  Output failing = Sh(kSparkctl + " selftest -c " + Seed());
  EXPECT_EQ(failing.exit_code, 2) << failing.out;
  EXPECT_EQ(failing.out.find("All checks passed."), std::string::npos) << failing.out;
  EXPECT_NE(failing.out.find("FAIL NET.CABLE"), std::string::npos) << failing.out;
  EXPECT_NE(failing.out.find("spark-1 p0 twin a (enp1s0f0np0) <-> spark-2 p1 twin a"),
            std::string::npos)
      << failing.out;
  EXPECT_NE(failing.out.find("fix: reseat or replace cable"), std::string::npos) << failing.out;
  std::cerr << failing.out;

  // Control traffic rides the WireGuard tunnel, whose endpoints are the management addresses:
  // with the cable still pulled and every TCP port but SSH closed on the management LAN, the
  // rendezvous and Gloo of the all-reduce still work, so they went over the tunnel.
  const std::string close_lan = "iptables -I INPUT -i enP7s7 -p tcp ! --dport 22 -j DROP";
  for (int r = 0; r < 4; ++r) ASSERT_EQ(Exec(r, close_lan).exit_code, 0) << "rank " << r;
  nlohmann::json cut = SelftestJson();
  EXPECT_EQ(Verdict(cut, "CONTROL.PLANE").first, "ok") << cut.dump(1);
  EXPECT_NE(Verdict(cut, "CONTROL.PLANE").second.find("WireGuard (sparkctl-wg0)"),
            std::string::npos) << cut.dump(1);
  EXPECT_EQ(Verdict(cut, "ALLREDUCE.CORRECT").first, "ok") << cut.dump(1);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(Exec(r, "iptables -D INPUT -i enP7s7 -p tcp ! --dport 22 -j DROP").exit_code, 0);
  }
  ASSERT_EQ(Sh(kSparkctl + " sim fault --name " + name_ + " plug spark-1 0").exit_code, 0);

  // A tunnel that is down moves the control traffic to the management LAN, with a warning that
  // names the node; the all-reduce still passes.
  ASSERT_EQ(Exec(2, "ip link set dev sparkctl-wg0 down").exit_code, 0);
  nlohmann::json down = SelftestJson();
  EXPECT_EQ(down["ok"], true) << down.dump(1);
  EXPECT_EQ(Verdict(down, "CONTROL.PLANE").first, "warn") << down.dump(1);
  EXPECT_NE(Verdict(down, "CONTROL.PLANE").second.find("spark-2: sparkctl-wg0 is down"),
            std::string::npos) << down.dump(1);
  EXPECT_EQ(Verdict(down, "NET.WIREGUARD").first, "warn") << down.dump(1);
  EXPECT_EQ(Verdict(down, "ALLREDUCE.CORRECT").first, "ok") << down.dump(1);
  ASSERT_EQ(Exec(2, "ip link set dev sparkctl-wg0 up").exit_code, 0);

  // The CPU all-reduce: one Gloo rank per node, every sum checked.
  Output bench = Sh(kSparkctl + " bench allreduce --cluster " + Seed() +
                    " -b 1K -e 4M -f 4 -n 3 --backend gloo");
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("# Out of bounds values : 0 OK"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("#  Rank  3 Group  0"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("     4194304       1048576     float     sum      -1"),
            std::string::npos)
      << bench.out;
  std::cerr << bench.out;
}

}  // namespace
