// ControlPlane: which network carries the control traffic, decided from each node's probe of
// its WireGuard tunnel. Pure (no nodes): probes are given as the probe command would print them.
#include "sparkctl/fabric/control_plane.h"

#include <gtest/gtest.h>

namespace spark::fabric {
namespace {

ClusterChanges ThreeNodes() {
  ClusterChanges c;
  for (int r = 0; r < 3; ++r) {
    NodeChanges n;
    n.node = "spark-" + std::to_string(r);
    n.management_address = "198.19.0." + std::to_string(10 + r);
    netplan::WireGuardPlan wg;
    wg.interface = "sparkctl-wg0";
    wg.address = *netplan::InterfaceAddress::Parse("10.253.255." + std::to_string(r + 1) + "/29");
    n.plan.wireguard = wg;
    n.plan.nccl_env = {{"NCCL_SOCKET_IFNAME", "=enP7s7"}, {"NCCL_NET", "IB"}};
    c.nodes.push_back(n);
  }
  return c;
}

// What the probe command prints on node r when its tunnel is up and `dead` does not answer.
std::string Output(int r, int dead = -1, bool up = true) {
  std::string out = up ? "@@if up\n" : "@@if down\n";
  for (int p = 0; p < 3; ++p) {
    if (p == r) continue;
    out += "@@peer 10.253.255." + std::to_string(p + 1) + (p == dead ? " fail\n" : " ok\n");
  }
  return out;
}

std::vector<ControlPlaneProbe> Probes(int dead = -1, int down = -1) {
  std::vector<ControlPlaneProbe> probes;
  for (int r = 0; r < 3; ++r) {
    probes.push_back(ParseControlProbe("spark-" + std::to_string(r), Output(r, dead, r != down)));
  }
  return probes;
}

TEST(ControlPlaneTest, AWorkingTunnelCarriesTheControlTraffic) {
  ControlPlane c = DecideControlPlane(ThreeNodes(), Probes());
  ASSERT_TRUE(c.wireguard) << c.reason;
  EXPECT_EQ(c.addresses.at("spark-0"), "10.253.255.1");
  EXPECT_EQ(c.addresses.at("spark-2"), "10.253.255.3");
  EXPECT_EQ(c.Describe(), "WireGuard (sparkctl-wg0)");
  auto env = c.Env(ThreeNodes().nodes[0].plan.nccl_env);
  EXPECT_EQ(env[0].value, "=sparkctl-wg0") << "NCCL's bootstrap sockets follow";
  EXPECT_EQ(env[1].value, "IB") << "the data path is not touched";
}

TEST(ControlPlaneTest, APeerThatDoesNotAnswerFallsBackWithTheReason) {
  ControlPlane c = DecideControlPlane(ThreeNodes(), Probes(/*dead=*/2));
  EXPECT_FALSE(c.wireguard);
  EXPECT_EQ(c.addresses.at("spark-0"), "198.19.0.10") << "every node on the management LAN";
  EXPECT_EQ(c.addresses.at("spark-2"), "198.19.0.12");
  EXPECT_NE(c.reason.find("spark-0: no answer from spark-2 at 10.253.255.3"), std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("sparkctl net apply"), std::string::npos) << "names the fix";
  auto env = c.Env(ThreeNodes().nodes[0].plan.nccl_env);
  EXPECT_EQ(env[0].value, "=enP7s7");
}

TEST(ControlPlaneTest, ADownInterfaceOrAnUnreachableNodeFallsBack) {
  ControlPlane down = DecideControlPlane(ThreeNodes(), Probes(-1, /*down=*/1));
  EXPECT_FALSE(down.wireguard);
  EXPECT_NE(down.reason.find("spark-1: sparkctl-wg0 is down or lacks 10.253.255.2/29"),
            std::string::npos) << down.reason;
  auto probes = Probes();
  probes[2] = {.node = "spark-2", .status = UnavailableError("spark-2: connection refused")};
  ControlPlane lost = DecideControlPlane(ThreeNodes(), probes);
  EXPECT_FALSE(lost.wireguard);
  EXPECT_NE(lost.reason.find("connection refused"), std::string::npos) << lost.reason;
}

TEST(ControlPlaneTest, NoTunnelInThePlanOrOneNodeUsesTheManagementLan) {
  ClusterChanges c = ThreeNodes();
  c.nodes[1].plan.wireguard.reset();
  ControlPlane off = DecideControlPlane(c, Probes());
  EXPECT_FALSE(off.wireguard);
  EXPECT_NE(off.reason.find("spark-1 has no WireGuard"), std::string::npos) << off.reason;
  ClusterChanges one = ThreeNodes();
  one.nodes.resize(1);
  EXPECT_FALSE(DecideControlPlane(one, Probes()).wireguard);
}

TEST(ControlPlaneTest, TheProbeCommandPingsEveryPeerAndChecksTheAddress) {
  netplan::WireGuardPlan own = *ThreeNodes().nodes[0].plan.wireguard;
  std::string cmd = ControlProbeCommand(own, {"10.253.255.2", "10.253.255.3"});
  EXPECT_NE(cmd.find("ip -4 -o addr show dev 'sparkctl-wg0' up"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("' inet 10.253.255.1/29 '"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("ping -n -q -c 2 -i 0.2 -W 1 10.253.255.2"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("10.253.255.3 ok"), std::string::npos) << cmd;
}

}  // namespace
}  // namespace spark::fabric
