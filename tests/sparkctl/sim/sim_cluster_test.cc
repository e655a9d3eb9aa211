// Root tests: real clusters of every topology are created, reached by SSH with strict host-key
// checking, pinged over every cable, and destroyed without a trace.
#include <gtest/gtest.h>

#include <filesystem>

#include "sparkctl/sim/network.h"
#include "sparkctl/sim/node_image.h"
#include "sparkctl/sim/simulator.h"
#include "tests/sparkctl/sim/sim_test_util.h"

namespace spark::sim {
namespace {

using testing::DiffAfterDestroy;
using testing::HostSnapshot;
using testing::Ping;
using testing::Sh;
using testing::Ssh;
using testing::TakeSnapshot;

class SimClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveRoot()) GTEST_SKIP() << "needs root (network namespaces)";
  }

  // Creates, checks and destroys one cluster; the host must look as before.
  void RoundTrip(const std::string& name, Topology topology, int nodes) {
    HostSnapshot before = TakeSnapshot();
    Result<ClusterState> c = sim_.Create({.name = name, .nodes = nodes, .topology = topology});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    CheckSsh(*c);
    CheckCables(*c);
    ASSERT_TRUE(sim_.Destroy(name).ok());
    EXPECT_EQ(DiffAfterDestroy(before, name, c->slot), "");
  }

  void CheckSsh(const ClusterState& c) {
    for (const NodeState& n : c.nodes) {
      CommandResult r = Ssh(sim_.Seeds(c.name), n,
                            "hostname; uname -r; grep CmaTotal /proc/meminfo; ulimit -l; "
                            "ls /sys/class/infiniband | tr '\\n' ' '; echo; "
                            "ls /sys/class/net | tr '\\n' ' '");
      ASSERT_EQ(r.exit_code, 0) << n.name << ": " << r.err;
      EXPECT_EQ(r.out, n.name + "\n" + kDefaultKernel + "\nCmaTotal:        1048576 kB\n" +
                           c.default_memlock + "\nroceP2p1s0f0 roceP2p1s0f1 rocep1s0f0 rocep1s0f1 \n" +
                           "enP2p1s0f0np0 enP2p1s0f1np1 enP7s7 enp1s0f0np0 enp1s0f1np1 lo ");
    }
  }

  // Temporary 198.18.x.0/24 addresses on both ends of every cable twin (or switch rail).
  void CheckCables(const ClusterState& c) {
    int subnet = 0;
    for (const Cable& cable : PlanCables(c.topology, c.nodes.size())) {
      for (int t = 0; t < kTwins; ++t, ++subnet) {
        const NodeState& a = c.nodes[cable.a.rank];
        const NodeState& b = c.nodes[cable.b.rank];
        std::string dev_a(FabricNetdev(cable.a.port, t)), dev_b(FabricNetdev(cable.b.port, t));
        std::string net = "198.18." + std::to_string(subnet) + ".";
        AddAddress(a, dev_a, net + "1");
        AddAddress(b, dev_b, net + "2");
        EXPECT_TRUE(Ping(a.netns, dev_a, net + "2")) << a.name << " " << dev_a << " -> " << b.name;
        DelAddress(a, dev_a, net + "1");
        DelAddress(b, dev_b, net + "2");
      }
    }
    if (c.topology == Topology::kSwitched) CheckRails(c);
    bool has_non_neighbours = c.topology == Topology::kLine
                                  ? c.nodes.size() >= 3
                                  : c.topology == Topology::kRing && c.nodes.size() >= 4;
    if (has_non_neighbours) CheckNotConnected(c.nodes[0], c.nodes[2]);
  }

  void CheckRails(const ClusterState& c) {
    for (int p = 0; p < kPorts; ++p) {
      for (int t = 0; t < kTwins; ++t) {
        std::string dev(FabricNetdev(p, t));
        std::string net = "198.18.1" + std::to_string(p * 2 + t) + ".";
        for (const NodeState& n : c.nodes) AddAddress(n, dev, net + std::to_string(n.rank + 1));
        for (const NodeState& n : c.nodes) {
          if (n.rank > 0) {
            EXPECT_TRUE(Ping(c.nodes[0].netns, dev, net + std::to_string(n.rank + 1)));
          }
        }
        for (const NodeState& n : c.nodes) DelAddress(n, dev, net + std::to_string(n.rank + 1));
      }
    }
  }

  // Both of x's port-0 twin 0 and z's port-1 twin 0 are cabled to rank 1, not to each other.
  void CheckNotConnected(const NodeState& x, const NodeState& z) {
    AddAddress(x, "enp1s0f0np0", "198.18.250.1");
    AddAddress(z, "enp1s0f1np1", "198.18.250.2");
    EXPECT_FALSE(Ping(x.netns, "enp1s0f0np0", "198.18.250.2"));
    DelAddress(x, "enp1s0f0np0", "198.18.250.1");
    DelAddress(z, "enp1s0f1np1", "198.18.250.2");
  }

  void AddAddress(const NodeState& n, const std::string& dev, const std::string& address) {
    ASSERT_EQ(Sh("ip -n " + n.netns + " addr add " + address + "/24 dev " + dev).exit_code, 0);
  }
  void DelAddress(const NodeState& n, const std::string& dev, const std::string& address) {
    EXPECT_EQ(Sh("ip -n " + n.netns + " addr del " + address + "/24 dev " + dev).exit_code, 0);
  }

  ProcessRunner runner_;
  Simulator sim_{runner_};
};

TEST_F(SimClusterTest, RingOfFourServesSshAndSeedFiles) {
  HostSnapshot before = TakeSnapshot();
  Result<ClusterState> c = sim_.Create({.name = "t-ring4", .nodes = 4});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SeedFiles seeds = sim_.Seeds("t-ring4");
  Result<std::string> yaml = ReadFile(seeds.inventory);
  ASSERT_TRUE(yaml.ok());
  EXPECT_NE(yaml->find("schema: sparkctl-cluster/v1\nname: t-ring4\n"), std::string::npos);
  EXPECT_NE(yaml->find("  - name: spark-3\n    address: " + c->nodes[3].mgmt_address),
            std::string::npos);
  EXPECT_NE(yaml->find("cidr: 198.19.255.0/28"), std::string::npos);
  EXPECT_TRUE(c->nodes[0].mgmt_address.starts_with("198.19."));
  CheckSsh(*c);
  CheckCables(*c);
  // A second create of the same name fails clearly and leaves the cluster alone.
  Result<ClusterState> again = sim_.Create({.name = "t-ring4", .nodes = 4});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Ssh(seeds, c->nodes[1], "true").exit_code, 0);
  // A wrong known_hosts entry is refused: strict checking is real.
  SeedFiles wrong = seeds;
  wrong.known_hosts = "/dev/null";
  EXPECT_NE(Ssh(wrong, c->nodes[0], "true").exit_code, 0);
  ASSERT_TRUE(sim_.Destroy("t-ring4").ok());
  EXPECT_FALSE(std::filesystem::exists(sim_.ClusterDir("t-ring4")));
  EXPECT_EQ(DiffAfterDestroy(before, "t-ring4", c->slot), "");
}

TEST_F(SimClusterTest, PairRoundTrip) { RoundTrip("t-pair", Topology::kPair, 2); }
TEST_F(SimClusterTest, RingOfThreeRoundTrip) { RoundTrip("t-ring3", Topology::kRing, 3); }
TEST_F(SimClusterTest, LineRoundTrip) { RoundTrip("t-line", Topology::kLine, 3); }
TEST_F(SimClusterTest, SwitchedRoundTrip) { RoundTrip("t-sw", Topology::kSwitched, 4); }
TEST_F(SimClusterTest, RingOfEightRoundTrip) { RoundTrip("t-ring8", Topology::kRing, 8); }

TEST_F(SimClusterTest, DestroyCleansUpAfterACrashedCreate) {
  HostSnapshot before = TakeSnapshot();
  // What a create leaves when it dies after the network exists but before any node is up.
  ClusterState c = PlanCluster("t-crash", Topology::kRing, 3, 200);
  std::filesystem::create_directories(sim_.ClusterDir("t-crash"));
  ASSERT_TRUE(SaveState(kDefaultStateRoot, c).ok());
  ASSERT_TRUE(CreateNetwork(runner_, c).ok());
  ASSERT_TRUE(SaveState(kDefaultStateRoot, c).ok());
  EXPECT_NE(TakeSnapshot().netns, before.netns);
  ASSERT_TRUE(sim_.Destroy("t-crash").ok());
  EXPECT_EQ(DiffAfterDestroy(before, "t-crash", 200), "");
  EXPECT_EQ(sim_.Destroy("t-crash").code(), StatusCode::kNotFound);
}

TEST_F(SimClusterTest, RejectsBadOptions) {
  EXPECT_EQ(sim_.Create({.name = "Bad Name"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sim_.Create({.name = "t-x", .nodes = 9}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::sim
