#include "netplan/node_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "netplan/render.h"
#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

using ::testing::HasSubstr;
using namespace ::spark::netplan::testing;  // NOLINT

FabricPlan PlanOf(const ClusterSpec& spec, const PlanInputs& inputs) {
  auto plan = BuildFabricPlan(spec, inputs);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : FabricPlan{};
}

std::string SysctlValue(const NodePlan& node, const std::string& key) {
  for (const Sysctl& s : node.sysctls) {
    if (s.key == key) return s.value;
  }
  return "";
}

TEST(NodePlanTest, RingNcclEnvironmentListsBothTwinsOfBothPorts) {
  ClusterSpec spec = MakeRing(4);
  PlanInputs inputs = MakeInputs(spec);
  inputs.nodes["spark-2"].gid_index = 5;
  FabricPlan plan = PlanOf(spec, inputs);
  EXPECT_EQ(plan.nodes[2].nccl_env,
            (std::vector<EnvVar>{{"NCCL_SOCKET_IFNAME", "=enP7s7"},
                                 {"NCCL_IB_HCA", "=rocep1s0f0,roceP2p1s0f0,rocep1s0f1,roceP2p1s0f1"},
                                 {"NCCL_IB_GID_INDEX", "5"},
                                 {"NCCL_NET", "IB"},
                                 {"NCCL_IB_DISABLE", "0"},
                                 {"NCCL_ALGO", "Ring"},
                                 {"NCCL_IB_SUBNET_AWARE_ROUTING", "1"},
                                 {"NCCL_IB_MERGE_NICS", "0"},
                                 {"NCCL_CROSS_NIC", "1"},
                                 {"SPARK_NCCL_TOPOLOGY", "ring"}}));
}

TEST(NodePlanTest, PairUsesOnlyTheCabledPort) {
  FabricPlan plan = PlanOf(MakePair(), MakeInputs(MakePair()));
  EXPECT_EQ(plan.nodes[0].Env("NCCL_IB_HCA"), "=rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(plan.nodes[0].Env("NCCL_ALGO"), "");
  EXPECT_TRUE(plan.nodes[0].sysctls.empty());
}

TEST(NodePlanTest, SwitchedTrafficClassIsOptional) {
  ClusterSpec spec = MakeSwitched(2);
  PlanInputs inputs = MakeInputs(spec);
  EXPECT_EQ(PlanOf(spec, inputs).nodes[0].Env("NCCL_IB_TC"), "");
  inputs.nccl_ib_tc = 106;
  FabricPlan plan = PlanOf(spec, inputs);
  EXPECT_EQ(plan.nodes[0].Env("NCCL_IB_TC"), "106");
  EXPECT_EQ(SysctlValue(plan.nodes[0], "net.ipv4.conf.enP2p1s0f1np1.arp_ignore"), "1");
  EXPECT_EQ(SysctlValue(plan.nodes[0], "net.ipv4.ip_forward"), "");
}

TEST(NodePlanTest, SocketInterfaceCanBeTheControlPlane) {
  ClusterSpec spec = MakeRing(3);
  PlanInputs inputs = MakeInputs(spec);
  inputs.nccl_socket_on_control_plane = true;
  EXPECT_EQ(PlanOf(spec, inputs).nodes[1].Env("NCCL_SOCKET_IFNAME"), "=sparkctl-wg0");
}

TEST(NodePlanTest, RingSysctlsDisableRpFilterEverywhereItCounts) {
  FabricPlan plan = PlanOf(MakeRing(4), MakeInputs(MakeRing(4)));
  const NodePlan& node = plan.nodes[1];
  EXPECT_EQ(node.sysctls.front().key, "net.ipv4.ip_forward");  // before per-netdev keys
  EXPECT_EQ(SysctlValue(node, "net.ipv4.conf.all.rp_filter"), "0");
  for (const FabricInterface& fi : node.addressing.interfaces) {
    std::string prefix = "net.ipv4.conf." + fi.netdev + ".";
    EXPECT_EQ(SysctlValue(node, prefix + "rp_filter"), "0");
    EXPECT_EQ(SysctlValue(node, prefix + "forwarding"), "1");
    EXPECT_EQ(SysctlValue(node, prefix + "ignore_routes_with_linkdown"), "1");
  }
  for (const Sysctl& s : node.sysctls) {
    EXPECT_EQ(s.key.find("enP7s7"), std::string::npos) << "management must not be touched";
  }
}

TEST(NodePlanTest, WireGuardUsesFabricForNeighboursAndManagementOtherwise) {
  FabricPlan plan = PlanOf(MakeRing(4), MakeInputs(MakeRing(4)));
  const WireGuardPlan& wg = *plan.nodes[0].wireguard;
  EXPECT_EQ(wg.address.ToString(), "10.253.255.1/29");
  EXPECT_EQ(wg.listen_port, 51871);
  ASSERT_EQ(wg.peers.size(), 3u);
  EXPECT_EQ(wg.peers[0].name, "spark-1");
  EXPECT_EQ(wg.peers[0].endpoint, "198.18.0.2:51871");  // over cable 0, twin a
  EXPECT_EQ(wg.peers[0].allowed_ip.ToString(), "10.253.255.2/32");
  EXPECT_EQ(wg.peers[1].endpoint, "198.19.0.12:51871");  // spark-2 is not adjacent
  EXPECT_FALSE(wg.peers[1].endpoint_on_fabric);
  EXPECT_EQ(wg.peers[2].endpoint, "198.18.6.1:51871");  // over cable 3 (spark-3 p0 is .1)
}

TEST(NodePlanTest, ControlPlaneCanBeLeftOut) {
  ClusterSpec spec = MakeRing(3);
  PlanInputs inputs = MakeInputs(spec);
  inputs.control_plane = false;
  for (auto& [name, in] : inputs.nodes) in.wg_private_key = in.wg_public_key = "";
  FabricPlan plan = PlanOf(spec, inputs);
  EXPECT_FALSE(plan.nodes[0].wireguard);
  EXPECT_EQ(RenderNetplanYaml(plan.nodes[0]).find("tunnels"), std::string::npos);
}

TEST(NodePlanTest, MissingOrBadInputsAreNamedPerNode) {
  ClusterSpec spec = MakeRing(3);
  PlanInputs inputs = MakeInputs(spec);
  inputs.nodes["spark-1"].gid_index = -1;
  inputs.nodes["spark-2"].wg_public_key = "short";
  inputs.nodes["spark-0"].management_interface = "";
  auto plan = BuildFabricPlan(spec, inputs);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("inputs.nodes[spark-1].gid_index: RoCE v2 GID"));
  EXPECT_THAT(plan.status().message(), HasSubstr("inputs.nodes[spark-2].wg_public_key"));
  EXPECT_THAT(plan.status().message(), HasSubstr("inputs.nodes[spark-0].management_interface"));
  inputs = MakeInputs(spec);
  inputs.nodes.erase("spark-2");
  EXPECT_THAT(BuildFabricPlan(spec, inputs).status().message(),
              HasSubstr("inputs.nodes[spark-2]: no facts"));
  inputs = MakeInputs(spec);
  inputs.wg_interface = "sparkctl-wireguard0";
  EXPECT_THAT(BuildFabricPlan(spec, inputs).status().message(), HasSubstr("inputs.wg_interface"));
  inputs = MakeInputs(spec);
  inputs.nodes["spark-1"].wg_public_key = inputs.nodes["spark-0"].wg_public_key;
  EXPECT_THAT(BuildFabricPlan(spec, inputs).status().message(), HasSubstr("used by another node"));
}

TEST(NodePlanTest, ResetUndoesApply) {
  FabricPlan plan = PlanOf(MakeRing(4), MakeInputs(MakeRing(4)));
  const NodePlan& node = plan.nodes[0];
  std::vector<Command> apply = ApplyCommands(node), reset = ResetCommands(node);
  // Every route and address apply adds is deleted by reset, and the MTU goes back to 1500.
  for (const Route& r : node.addressing.routes) {
    std::string del = "ip route del " + r.to.ToString() + " via " + r.via.ToString() + " dev " +
                      r.dev + " metric " + std::to_string(r.metric);
    EXPECT_NE(std::find_if(reset.begin(), reset.end(),
                           [&](const Command& c) { return c.ToString() == del; }),
              reset.end())
        << del;
  }
  int addr_del = 0, mtu_reset = 0;
  for (const Command& c : reset) {
    addr_del += c.ToString().starts_with("ip addr del ");
    mtu_reset += c.ToString().ends_with(" mtu 1500");
  }
  EXPECT_EQ(addr_del, 4);
  EXPECT_EQ(mtu_reset, 4);
  EXPECT_EQ(reset.front().ToString(), "ip link del dev sparkctl-wg0");
  EXPECT_EQ(ResetFiles(node),
            (std::vector<std::string>{kNetplanPath, kSysctlPath,
                                      "/etc/wireguard/sparkctl-wg0.conf"}));
}

}  // namespace
}  // namespace spark::netplan
