// Root tests: every fault changes what a node reports over SSH, and its inverse (or `clear`)
// undoes it. Also the emulated GB10: GID table, stand-in tools.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "base/strings.h"
#include "sparkctl/sim/faults.h"
#include "sparkctl/sim/simulator.h"
#include "tests/sparkctl/sim/sim_test_util.h"

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    ::spark::Status status_ = (expr);                    \
    ASSERT_TRUE(status_.ok()) << status_.ToString();     \
  } while (0)
#define EXPECT_OK(expr)                                  \
  do {                                                   \
    ::spark::Status status_ = (expr);                    \
    EXPECT_TRUE(status_.ok()) << status_.ToString();     \
  } while (0)

namespace spark::sim {
namespace {

using testing::Ping;
using testing::Sh;
using testing::Ssh;

class SimFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveRoot()) return;
    sim_ = new Simulator(runner_);
    Result<ClusterState> c = sim_->Create({.name = "t-faults", .nodes = 2, .topology = Topology::kPair});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = new ClusterState(*c);
  }
  static void TearDownTestSuite() {
    if (sim_ != nullptr) {
      EXPECT_TRUE(sim_->Destroy("t-faults").ok());
    }
    delete sim_;
    delete cluster_;
    sim_ = nullptr;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!testing::HaveRoot()) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_NE(cluster_, nullptr);
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_OK(Inject({"clear"}));
    }
  }

  static Status Inject(const std::vector<std::string>& args) {
    SPARK_ASSIGN_OR_RETURN(Fault f, ParseFault(args));
    return sim_->InjectFault("t-faults", f);
  }
  // stdout of a command run over SSH on rank `rank`, trimmed.
  static std::string On(int rank, const std::string& command) {
    CommandResult r = Ssh(sim_->Seeds("t-faults"), cluster_->nodes[rank], command);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    return std::string(Trim(r.out));
  }
  // Polls a command over SSH until it prints `want` (the GID table follows netdev events).
  static std::string Eventually(int rank, const std::string& command, const std::string& want) {
    std::string got;
    for (int i = 0; i < 100 && (got = On(rank, command)) != want; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return got;
  }

  // "<slot>:<rank>:<suffix>" of the simulator's MAC scheme 02:5c:<slot>:<rank>:<port>:<twin>.
  static std::string Mac(int rank, const std::string& suffix) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%02x:%02x:", cluster_->slot, rank);
    return buf + suffix;
  }

  static ProcessRunner runner_;
  static Simulator* sim_;
  static ClusterState* cluster_;
};

ProcessRunner SimFaultsTest::runner_;
Simulator* SimFaultsTest::sim_ = nullptr;
ClusterState* SimFaultsTest::cluster_ = nullptr;

TEST_F(SimFaultsTest, KernelRelease) {
  ASSERT_OK(Inject({"kernel", "spark-1", "7.0.0-1019-nvidia"}));
  EXPECT_EQ(On(1, "uname -r; cat /proc/sys/kernel/osrelease"), "7.0.0-1019-nvidia\n7.0.0-1019-nvidia");
  EXPECT_EQ(On(0, "uname -r"), kDefaultKernel);
  ASSERT_OK(Inject({"kernel", "1", "default"}));
  EXPECT_EQ(On(1, "uname -r"), kDefaultKernel);
}

TEST_F(SimFaultsTest, CmaAndMemlock) {
  ASSERT_OK(Inject({"cma", "0", "0"}));
  ASSERT_OK(Inject({"memlock", "0", "64"}));
  EXPECT_EQ(On(0, "grep -E 'CmaTotal|CmaFree' /proc/meminfo | tr -s ' '"),
            "CmaTotal: 0 kB\nCmaFree: 0 kB");
  EXPECT_EQ(On(0, "ulimit -l; grep -c 'memlock 64' /etc/security/limits.d/90-sparkctl-sim.conf"),
            "64\n4");
  ASSERT_OK(Inject({"memlock", "0", "default"}));
  EXPECT_EQ(On(0, "ulimit -l"), cluster_->default_memlock);
  ASSERT_OK(Inject({"cma", "0", "default"}));
  EXPECT_EQ(On(0, "grep CmaTotal /proc/meminfo | tr -s ' '"), "CmaTotal: 1048576 kB");
}

// What the memory plan and the engine's guards read on a node: MemAvailable, shrunk and restored.
TEST_F(SimFaultsTest, MemoryAvailable) {
  ASSERT_OK(Inject({"memory", "1", "2097152"}));
  EXPECT_EQ(On(1, "grep MemAvailable /proc/meminfo | tr -s ' '"), "MemAvailable: 2097152 kB");
  EXPECT_EQ(On(0, "grep MemAvailable /proc/meminfo | tr -s ' '"), "MemAvailable: 123894660 kB");
  ASSERT_OK(Inject({"memory", "1", "default"}));
  EXPECT_EQ(On(1, "grep MemAvailable /proc/meminfo | tr -s ' '"), "MemAvailable: 123894660 kB");
}

TEST_F(SimFaultsTest, MachineIdDuplicate) {
  std::string id0 = On(0, "cat /etc/machine-id");
  EXPECT_NE(id0, On(1, "cat /etc/machine-id"));
  ASSERT_OK(Inject({"machine-id", "1", id0}));
  EXPECT_EQ(On(1, "cat /etc/machine-id"), id0);
  ASSERT_OK(Inject({"machine-id", "1", "default"}));
  EXPECT_NE(On(1, "cat /etc/machine-id"), id0);
}

TEST_F(SimFaultsTest, SshdStopStart) {
  ASSERT_OK(Inject({"sshd", "1", "stop"}));
  EXPECT_EQ(Ssh(sim_->Seeds("t-faults"), cluster_->nodes[1], "true").exit_code, 255);
  ASSERT_OK(Inject({"sshd", "1", "start"}));
  EXPECT_EQ(On(1, "hostname"), "spark-1");
}

TEST_F(SimFaultsTest, ForwardDrop) {
  EXPECT_EQ(On(0, "iptables -S FORWARD | head -1"), "-P FORWARD ACCEPT");
  ASSERT_OK(Inject({"forward-drop", "0"}));
  EXPECT_EQ(On(0, "iptables -S FORWARD | head -1"), "-P FORWARD DROP");
  ASSERT_OK(Inject({"forward-accept", "0"}));
  EXPECT_EQ(On(0, "iptables -S FORWARD | head -1"), "-P FORWARD ACCEPT");
}

TEST_F(SimFaultsTest, KillByPattern) {
  On(1, "setsid sleep 4242 >/dev/null 2>&1 < /dev/null & echo started");
  EXPECT_EQ(On(1, "pgrep -fc 'slee[p] 4242'"), "1");
  ASSERT_OK(Inject({"kill", "1", "sleep 4242"}));
  EXPECT_EQ(Ssh(sim_->Seeds("t-faults"), cluster_->nodes[1], "pgrep -f 'slee[p] 4242'").exit_code, 1);
  EXPECT_EQ(Inject({"kill", "1", "sleep 4242"}).code(), StatusCode::kNotFound);
}

TEST_F(SimFaultsTest, UnplugFollowsLinkStateOnBothEnds) {
  const std::string state = "cat /sys/class/infiniband/rocep1s0f0/ports/1/state";
  EXPECT_EQ(On(0, state), "4: ACTIVE");
  ASSERT_OK(Inject({"unplug", "spark-0", "0"}));
  EXPECT_EQ(On(0, state), "1: DOWN");
  EXPECT_EQ(On(1, state + "; cat /sys/class/net/enp1s0f0np0/carrier"), "1: DOWN\n0");
  EXPECT_EQ(On(1, "ibdev2netdev | grep rocep1s0f0"), "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)");
  ASSERT_OK(Inject({"plug", "0", "p0"}));
  EXPECT_EQ(On(1, state), "4: ACTIVE");
}

TEST_F(SimFaultsTest, SwapCrossesTwins) {
  const NodeState& a = cluster_->nodes[0];
  const NodeState& b = cluster_->nodes[1];
  const std::string b_twin0 = "02:5c:" + Mac(1, "00:00"), b_twin1 = "02:5c:" + Mac(1, "00:01");
  ASSERT_EQ(Sh("ip -n " + a.netns + " addr add 198.18.7.1/24 dev enp1s0f0np0").exit_code, 0);
  ASSERT_EQ(Sh("ip -n " + b.netns + " addr add 198.18.7.2/24 dev enP2p1s0f0np0").exit_code, 0);
  EXPECT_EQ(testing::PeerMac(a.netns, "enp1s0f0np0", "198.18.7.2"), b_twin0);
  ASSERT_OK(Inject({"swap", "0", "0"}));
  EXPECT_EQ(testing::PeerMac(a.netns, "enp1s0f0np0", "198.18.7.2"), b_twin1);
  EXPECT_TRUE(Ping(a.netns, "enp1s0f0np0", "198.18.7.2"));
  ASSERT_OK(Inject({"swap", "0", "0"}));
  EXPECT_EQ(testing::PeerMac(a.netns, "enp1s0f0np0", "198.18.7.2"), b_twin0);
  Sh("ip -n " + a.netns + " addr del 198.18.7.1/24 dev enp1s0f0np0");
  Sh("ip -n " + b.netns + " addr del 198.18.7.2/24 dev enP2p1s0f0np0");
}

TEST_F(SimFaultsTest, MiscableNeedsARing) {
  EXPECT_EQ(Inject({"miscable"}).code(), StatusCode::kFailedPrecondition);
}

TEST_F(SimFaultsTest, GidTableFollowsAddresses) {
  const std::string gid3 = "cat /sys/class/infiniband/rocep1s0f0/ports/1/gids/3";
  EXPECT_EQ(On(0, gid3), "0000:0000:0000:0000:0000:0000:0000:0000");
  On(0, "ip addr add 198.18.0.1/24 dev enp1s0f0np0");
  EXPECT_EQ(Eventually(0, gid3, "0000:0000:0000:0000:0000:ffff:c612:0001"),
            "0000:0000:0000:0000:0000:ffff:c612:0001");
  EXPECT_EQ(On(0, "cd /sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs; cat types/3 ndevs/3"),
            "RoCE v2\nenp1s0f0np0");
  EXPECT_TRUE(On(0, "cat /sys/class/infiniband/rocep1s0f0/ports/1/gids/0").starts_with("fe80:"));
  EXPECT_NE(On(0, "show_gids rocep1s0f0").find("198.18.0.1"), std::string::npos);
  On(0, "ip link set dev enp1s0f0np0 mtu 9000");
  EXPECT_EQ(Eventually(0, "cat /sys/class/infiniband/rocep1s0f0/ports/1/active_mtu", "4096 (5)"),
            "4096 (5)");
  On(0, "ip addr del 198.18.0.1/24 dev enp1s0f0np0; ip link set dev enp1s0f0np0 mtu 1500");
  EXPECT_EQ(Eventually(0, gid3, "0000:0000:0000:0000:0000:0000:0000:0000"),
            "0000:0000:0000:0000:0000:0000:0000:0000");
}

TEST_F(SimFaultsTest, StandInTools) {
  EXPECT_EQ(On(0, "nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total "
                  "--format=csv,noheader"),
            "NVIDIA GB10, 2405 MHz, 3003 MHz, [N/A]");
  std::string smi = On(0, "nvidia-smi");
  EXPECT_NE(smi.find("Driver Version: 580."), std::string::npos);
  EXPECT_NE(smi.find("CUDA Version: 13.0"), std::string::npos);
  EXPECT_EQ(On(1, "grep -c 'DGX Spark' /etc/dgx-release"), "3");
  EXPECT_EQ(On(1, "update-grub 2>&1 | tail -1"), "done");
  EXPECT_EQ(On(1, "ibdev2netdev | wc -l"), "4");
}

TEST_F(SimFaultsTest, ClearUndoesEverything) {
  ASSERT_OK(Inject({"kernel", "0", "7.0.0-1019-nvidia"}));
  ASSERT_OK(Inject({"cma", "1", "0"}));
  ASSERT_OK(Inject({"unplug", "1", "0"}));
  ASSERT_OK(Inject({"sshd", "1", "stop"}));
  ASSERT_OK(Inject({"clear"}));
  EXPECT_EQ(On(0, "uname -r"), kDefaultKernel);
  EXPECT_EQ(On(1, "grep CmaTotal /proc/meminfo | tr -s ' '; "
                  "cat /sys/class/infiniband/rocep1s0f0/ports/1/state"),
            "CmaTotal: 1048576 kB\n4: ACTIVE");
}

class SimLineFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveRoot()) GTEST_SKIP() << "needs root (network namespaces)";
  }
};

TEST_F(SimLineFaultsTest, MiscableTurnsFirstCableIntoP0P0) {
  ProcessRunner runner;
  Simulator sim(runner);
  Result<ClusterState> c = sim.Create({.name = "t-misc", .nodes = 3, .topology = Topology::kLine});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const NodeState& a = c->nodes[0];
  const NodeState& b = c->nodes[1];
  Sh("ip -n " + a.netns + " addr add 198.18.9.1/24 dev enp1s0f0np0");
  Sh("ip -n " + b.netns + " addr add 198.18.9.2/24 dev enp1s0f0np0");
  EXPECT_FALSE(Ping(a.netns, "enp1s0f0np0", "198.18.9.2"));
  ASSERT_TRUE(sim.InjectFault("t-misc", *ParseFault({"miscable"})).ok());
  EXPECT_TRUE(Ping(a.netns, "enp1s0f0np0", "198.18.9.2"));
  ASSERT_TRUE(sim.InjectFault("t-misc", *ParseFault({"miscable"})).ok());
  EXPECT_FALSE(Ping(a.netns, "enp1s0f0np0", "198.18.9.2"));
  EXPECT_TRUE(sim.Destroy("t-misc").ok());
}

}  // namespace
}  // namespace spark::sim
