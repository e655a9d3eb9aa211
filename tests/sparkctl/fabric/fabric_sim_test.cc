// Root tests on simulated clusters (real netns, veth, sshd): apply + verify on every topology,
// idempotence, a pulled cable, reset to the exact prior state, and rollbacks (a command failing
// mid-apply; a controller that never confirms). Each test destroys its cluster, also on failure.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/fabric/apply.h"
#include "sparkctl/fabric/roce_qos.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/sim/node_image.h"
#include "sparkctl/sim/simulator.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::fabric {
namespace {

using nlohmann::json;

// The inventory discover would write: ranks, cabling from the simulator's own plan, kind.
netplan::ClusterSpec Discovered(netplan::ClusterSpec spec, sim::Topology topology) {
  int n = spec.nodes.size();
  for (int r = 0; r < n; ++r) {
    spec.nodes[r].rank = r;
    spec.nodes[r].ports = {{"p0", std::nullopt}, {"p1", std::nullopt}};
  }
  for (const sim::Cable& c : sim::PlanCables(topology, n)) {
    spec.nodes[c.a.rank].ports[c.a.port].peer = netplan::PortPeer{sim::NodeName(c.b.rank),
                                                                  "p" + std::to_string(c.b.port)};
    spec.nodes[c.b.rank].ports[c.b.port].peer = netplan::PortPeer{sim::NodeName(c.a.rank),
                                                                  "p" + std::to_string(c.a.port)};
  }
  spec.fabric.kind = *netplan::ParseTopology(sim::TopologyName(topology));
  return spec;
}

class FabricSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
  }
  void TearDown() override {
    if (!name_.empty()) sim_.Destroy(name_).IgnoreError();
  }

  void Create(const std::string& name, sim::Topology topology, int nodes) {
    sim_.Destroy(name).IgnoreError();  // a leftover of an earlier crashed run
    auto c = sim_.Create({.name = name, .nodes = nodes, .topology = topology});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    name_ = name;
    JumboPatchPanel(c->wires_netns);
    auto seed = inventory::LoadClusterFile(sim_.Seeds(name).inventory);
    ASSERT_TRUE(seed.ok()) << seed.status().ToString();
    spec_ = Discovered(*seed, topology);
    auto t = host::MakeTransport(spec_, {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    transport_ = std::move(*t);
  }

  // The simulator's patch panel (wire ends and bridges) keeps the kernel's 1500-byte default; a
  // DAC cable or a RoCE switch carries jumbo frames, so the tests raise it to 9216 like a real
  // switch port (until the simulator does it itself).
  void JumboPatchPanel(const std::string& wires) {
    auto links = runner_.Run({"ip", "-n", wires, "-o", "link", "show"});
    ASSERT_TRUE(links.ok());
    std::vector<std::string> bridges;
    for (const std::string& line : Split(links->out, '\n', true)) {
      std::vector<std::string> w = Split(line, ' ', true);
      if (w.size() < 2) continue;
      std::string dev = w[1].substr(0, w[1].find_first_of(":@"));
      if (dev == "lo") continue;
      if (line.find(" master ") == std::string::npos) {
        bridges.push_back(dev);
        continue;
      }
      ASSERT_EQ(runner_.Run({"ip", "-n", wires, "link", "set", dev, "mtu", "9216"})->exit_code, 0)
          << dev;
    }
    for (const std::string& b : bridges)
      (void)runner_.Run({"ip", "-n", wires, "link", "set", b, "mtu", "9216"});
  }

  // `ip -j addr` (lifetimes dropped) and `ip -j route` of every node.
  std::vector<std::string> NodeStates() {
    std::vector<std::string> out;
    for (const auto& n : spec_.nodes) {
      auto r = transport_->Run(n.name, "ip -j addr show; echo; ip -j route show; ip -j -6 route show; ip -br link");
      EXPECT_TRUE(r.ok() && r->ok());
      std::string text = r.ok() ? r->stdout_data : "";
      std::string addr = text.substr(0, text.find('\n'));
      json a = json::parse(addr, nullptr, false);
      for (auto& link : a) {
        for (auto& info : link["addr_info"]) {
          info.erase("valid_life_time");
          info.erase("preferred_life_time");
          info.erase("tentative");  // DAD of a just-created node may still run
        }
      }
      out.push_back(n.name + ": " + a.dump() + text.substr(text.find('\n')));
    }
    return out;
  }

  ApplyReport Apply(std::chrono::seconds rollback_after = std::chrono::seconds(60)) {
    ApplyOptions o;
    o.rollback_after = rollback_after;
    auto r = ApplyCluster(*transport_, spec_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ApplyReport{};
  }

  void ApplyVerifyReset() {
    std::vector<std::string> before = NodeStates();
    ApplyReport r = Apply();
    ASSERT_TRUE(r.Outcome().ok()) << r.Outcome().ToString();
    ASSERT_TRUE(r.verify && r.verify->ok()) << (r.verify ? r.verify->Summary() : "no verify");
    EXPECT_GT(r.changes.Count(), 0u);
    size_t n = spec_.nodes.size();
    size_t reach = 0;
    for (const auto& c : r.verify->checks) reach += c.kind == "reach" && c.ok;
    EXPECT_EQ(reach, n * (n - 1) * r.changes.nodes[0].plan.addressing.interfaces.size());
    auto reset = ResetCluster(*transport_, spec_, {});
    ASSERT_TRUE(reset.ok()) << reset.status().ToString();
    for (const auto& node : reset->nodes) EXPECT_TRUE(node.status.ok()) << node.status.ToString();
    EXPECT_EQ(NodeStates(), before);
  }

  ProcessRunner runner_;
  sim::Simulator sim_{runner_};
  std::string name_;
  netplan::ClusterSpec spec_;
  std::unique_ptr<ssh::Transport> transport_;
};

TEST_F(FabricSimTest, RingOfFourAppliesVerifiesSurvivesAPulledCableAndResets) {
  ASSERT_NO_FATAL_FAILURE(Create("fab4", sim::Topology::kRing, 4));
  std::vector<std::string> before = NodeStates();

  ApplyReport first = Apply();
  ASSERT_TRUE(first.Outcome().ok()) << first.Outcome().ToString();
  std::cerr << "4-ring apply (plan, keys, arm, apply, verify, confirm): " << first.seconds
            << " s, " << first.changes.Count() << " changes; verify " << first.verify->seconds
            << " s\n";
  ASSERT_TRUE(first.verify && first.verify->ok()) << first.verify->Summary();
  size_t reach = 0, wg = 0;
  for (const auto& c : first.verify->checks) {
    reach += c.kind == "reach" && c.ok;
    wg += c.kind == "wireguard" && c.ok;
  }
  EXPECT_EQ(reach, 4u * 3u * 4u);  // every ordered pair, every address
  EXPECT_EQ(wg, 4u * 3u);
  // The GID index was read from each node's table once apply had given it addresses (the
  // simulator's RoCE v2 IPv4 entry is at 3 with one address per netdev).
  for (const auto& n : first.changes.nodes) {
    EXPECT_FALSE(n.gid_pending) << n.node;
    EXPECT_EQ(n.plan.Env("NCCL_IB_GID_INDEX"), "3") << n.node;
  }
  auto replanned = PlanChanges(*transport_, spec_, {});
  ASSERT_TRUE(replanned.ok()) << replanned.status().ToString();
  EXPECT_EQ(replanned->nodes[2].plan.Env("NCCL_IB_GID_INDEX"), "3");
  auto mode = transport_->Run("spark-1", "stat -c %a /etc/netplan/60-sparkctl-fabric.yaml");
  ASSERT_TRUE(mode.ok());
  EXPECT_EQ(mode->stdout_data, "600\n");

  ApplyReport second = Apply();
  EXPECT_TRUE(second.Outcome().ok());
  std::cerr << "4-ring second apply: " << second.seconds << " s\n";
  EXPECT_EQ(second.changes.Count(), 0u);

  // Pull the cable at spark-0 p0 (cable 0 to spark-1 p1).
  ASSERT_TRUE(sim_.InjectFault("fab4", {sim::FaultKind::kUnplug, "spark-0", 0, ""}).ok());
  auto changes = PlanChanges(*transport_, spec_, {});
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  auto v = VerifyCluster(*transport_, *changes);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->ok());
  ASSERT_FALSE(v->suspect_cables.empty());
  EXPECT_EQ(v->suspect_cables[0],
            "cable 0: spark-0 p0 twin a (enp1s0f0np0) <-> spark-1 p1 twin a (enp1s0f1np1)");
  for (const auto& c : v->checks) {
    // The far side (spark-2, spark-1's other port) still answers over the backup route.
    if (c.node == "spark-0" && (c.target == "198.18.2.1" || c.target == "198.18.4.1" ||
                                c.target == "198.18.5.1")) {
      EXPECT_TRUE(c.ok) << c.target << " " << c.detail;
    }
    if (c.kind == "wireguard") {
      EXPECT_TRUE(c.ok) << c.node << " -> " << c.target;
    }
    if (c.node == "spark-0" && c.kind == "route" && c.target == "198.18.2.0/24") {
      EXPECT_FALSE(c.ok);
      EXPECT_NE(c.detail.find("via 198.18.6.1"), std::string::npos) << c.detail;
    }
  }
  ASSERT_TRUE(sim_.InjectFault("fab4", {sim::FaultKind::kPlug, "spark-0", 0, ""}).ok());

  auto reset = ResetCluster(*transport_, spec_, {});
  ASSERT_TRUE(reset.ok()) << reset.status().ToString();
  for (const auto& n : reset->nodes) EXPECT_TRUE(n.status.ok()) << n.status.ToString();
  EXPECT_EQ(NodeStates(), before);

  // A command failing mid-apply on one node (wg setconf, after addresses and routes) rolls
  // every node back.
  std::string stub = sim_.ClusterDir("fab4") + "/nodes/spark-2/bin/wg";
  std::ofstream(stub) << "#!/bin/sh\nif [ \"$1\" = setconf ]; then echo injected >&2; exit 1; fi\n"
                         "exec /usr/bin/wg \"$@\"\n";
  chmod(stub.c_str(), 0755);
  ApplyReport failed = Apply();
  unlink(stub.c_str());
  EXPECT_FALSE(failed.Outcome().ok());
  EXPECT_TRUE(failed.rolled_back);
  EXPECT_TRUE(failed.rollback_status.ok()) << failed.rollback_status.ToString();
  EXPECT_NE(failed.Outcome().message().find("spark-2"), std::string::npos);
  EXPECT_EQ(NodeStates(), before);

}

// A controller that never confirms (it died, or lost the nodes): each node's timer restores the
// state from before the apply by itself.
TEST_F(FabricSimTest, UnconfirmedApplyRollsBackByItself) {
  ASSERT_NO_FATAL_FAILURE(Create("fabt", sim::Topology::kPair, 2));
  std::vector<std::string> before = NodeStates();
  auto c = PlanChanges(*transport_, spec_, {});
  ASSERT_TRUE(c.ok());
  std::vector<std::string> names;
  for (const auto& n : c->nodes) names.push_back(n.node);
  ASSERT_TRUE(EnsureWireGuardKeys(*transport_, names).ok());
  c = PlanChanges(*transport_, spec_, {});
  ASSERT_TRUE(c.ok());
  // Armed and applied on all nodes at once; the deadline leaves room for a slow, shared host.
  auto applied = ssh::ForEachNode<bool>(names, [&](const std::string& node) -> Result<bool> {
    SPARK_RETURN_IF_ERROR(ArmRollback(*transport_, *c->Find(node), std::chrono::seconds(8)));
    SPARK_RETURN_IF_ERROR(ApplyNode(*transport_, *c->Find(node)));
    return true;
  });
  ASSERT_TRUE(ssh::JoinNodeErrors(applied).ok()) << ssh::JoinNodeErrors(applied).ToString();
  EXPECT_NE(NodeStates(), before);
  auto start = std::chrono::steady_clock::now();
  while (NodeStates() != before && std::chrono::steady_clock::now() - start < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(NodeStates(), before);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(FabricSimTest, RingOfThree) {
  ASSERT_NO_FATAL_FAILURE(Create("fab3", sim::Topology::kRing, 3));
  ApplyVerifyReset();
}
TEST_F(FabricSimTest, Pair) {
  ASSERT_NO_FATAL_FAILURE(Create("fabp", sim::Topology::kPair, 2));
  ApplyVerifyReset();
}
// Lossless RoCE on a switch: apply sets PFC, DSCP trust and ECN on every fabric netdev (the
// simulator's dcb and mlx5 ECN knobs), NCCL uses the lossless class, a setting lost on one node
// is found and put back by the next apply, and reset clears them with the rest.
TEST_F(FabricSimTest, SwitchedIsLosslessAndResetClearsIt) {
  ASSERT_NO_FATAL_FAILURE(Create("fabs", sim::Topology::kSwitched, 4));
  auto qos = [&](const std::string& node) {
    std::vector<std::string> devs = {"enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1",
                                     "enP2p1s0f1np1"};
    auto r = transport_->Run(node, QosProbeCommand(devs));
    EXPECT_TRUE(r.ok() && r->ok()) << node;
    return ParseQosProbe(devs, r.ok() ? r->stdout_data : "");
  };
  std::vector<std::string> before = NodeStates();
  ApplyReport r = Apply();
  ASSERT_TRUE(r.Outcome().ok()) << r.Outcome().ToString();
  ASSERT_TRUE(r.verify && r.verify->ok()) << (r.verify ? r.verify->Summary() : "no verify");
  for (const auto& n : r.changes.nodes) {
    EXPECT_EQ(n.plan.Env("NCCL_IB_TC"), "106") << n.node;
    for (const QosState& q : qos(n.node)) EXPECT_TRUE(q.ok()) << n.node << " " << q.netdev << ": " << q.Missing();
  }

  ASSERT_TRUE(transport_->Run("spark-2", "dcb pfc set dev enp1s0f0np0 prio-pfc all:off && "
                                         "echo 0 > /sys/class/net/enp1s0f1np1/ecn/roce_rp/enable/3")
                  ->ok());
  auto changes = PlanChanges(*transport_, spec_, {});
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  for (const auto& n : changes->nodes) {
    EXPECT_EQ(n.Count(), n.node == "spark-2" ? 1u : 0u) << n.node << ": " << n.qos_why;
  }
  const NodeChanges* lost = changes->Find("spark-2");
  EXPECT_TRUE(lost->qos);
  EXPECT_NE(lost->qos_why.find("enp1s0f0np0: PFC off on priority 3"), std::string::npos)
      << lost->qos_why;
  EXPECT_NE(lost->qos_why.find("enp1s0f1np1: ECN reaction point off"), std::string::npos)
      << lost->qos_why;
  // selftest verifies it: ROCE.LOSSLESS fails on spark-2 only, naming the netdevs. Through the
  // real binary: selftest installs the running program on the nodes as sparkctl.
  const std::string seed = sim_.Seeds(name_).inventory;
  const std::string sparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
  ASSERT_EQ(runner_.Run({sparkctl, "discover", "-c", seed})->exit_code, 0);
  auto st = runner_.Run({sparkctl, "selftest", "-c", seed, "--json"});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->exit_code, 2) << st->out;
  json report = json::parse(st->out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << st->out;
  int lossless = 0;
  for (const auto& c : report["checks"]) {
    if (c["id"] != "ROCE.LOSSLESS") continue;
    ++lossless;
    const std::string node = c["node"], seen = c["seen"];
    EXPECT_EQ(c["verdict"] == "fail", node == "spark-2") << node << ": " << seen;
    if (node == "spark-2") {
      EXPECT_NE(seen.find("enp1s0f0np0: PFC off on priority 3"), std::string::npos) << seen;
    }
  }
  EXPECT_EQ(lossless, 4) << st->out;
  ApplyReport again = Apply();
  ASSERT_TRUE(again.Outcome().ok()) << again.Outcome().ToString();
  for (const QosState& q : qos("spark-2")) EXPECT_TRUE(q.ok()) << q.netdev << ": " << q.Missing();

  auto reset = ResetCluster(*transport_, spec_, {});
  ASSERT_TRUE(reset.ok()) << reset.status().ToString();
  for (const auto& node : reset->nodes) EXPECT_TRUE(node.status.ok()) << node.status.ToString();
  EXPECT_EQ(NodeStates(), before);
  for (const auto& n : spec_.nodes) {
    for (const QosState& q : qos(n.name)) {
      EXPECT_TRUE(q.read && !q.pfc && !q.trust_dscp && !q.dscp_prio && !q.ecn_np && !q.ecn_rp)
          << n.name << " " << q.netdev << ": " << q.raw;
    }
  }
}
TEST_F(FabricSimTest, RingOfEight) {
  ASSERT_NO_FATAL_FAILURE(Create("fab8", sim::Topology::kRing, 8));
  ApplyVerifyReset();
}

}  // namespace
}  // namespace spark::fabric
