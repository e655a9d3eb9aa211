#include "sparkctl/host/facts_gather.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace spark::host {
namespace {

namespace fs = std::filesystem;

// A fake DGX Spark file system tree, written the way the kernel presents it.
class FakeRoot {
 public:
  FakeRoot() : dir_(fs::path(testing::TempDir()) / ("facts-" + std::to_string(getpid()))) {
    fs::remove_all(dir_);
  }
  ~FakeRoot() { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return dir_.string(); }

 private:
  fs::path dir_;
};

void WriteSpark(FakeRoot& r) {
  r.Write("proc/sys/kernel/hostname", "spark-a\n");
  r.Write("proc/sys/kernel/osrelease", "6.17.0-1032-nvidia\n");
  r.Write("etc/machine-id", "0123456789abcdef0123456789abcdef\n");
  r.Write("etc/os-release", "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\n");
  r.Write("etc/dgx-release", "DGX_NAME=\"DGX Spark\"\nDGX_SWBUILD_VERSION=\"7.2.3\"\n");
  r.Write("proc/meminfo",
          "MemTotal:       127601732 kB\nMemAvailable:   120000000 kB\nCmaTotal:         524288 kB\n"
          "CmaFree:          500000 kB\n");
  r.Write("proc/self/limits",
          "Limit                     Soft Limit           Hard Limit           Units\n"
          "Max locked memory         8388608              8388608              bytes\n");
  r.Write("sys/class/net/enp1s0f0np0/operstate", "up\n");
  r.Write("sys/class/net/enp1s0f0np0/mtu", "9000\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/state", "4: ACTIVE\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/active_mtu", "4096 (5)\n");
  r.Write("sys/class/infiniband/rocep1s0f0/device/net/enp1s0f0np0/ifindex", "3\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gids/0", "fe80:0000:0000:0000:5c1e:63ff:fe00:0001\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/0", "IB/RoCE v1\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gids/1", "fe80:0000:0000:0000:5c1e:63ff:fe00:0001\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/1", "RoCE v2\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gids/2", "0000:0000:0000:0000:0000:ffff:c612:0001\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/2", "IB/RoCE v1\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:c612:0001\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/3", "RoCE v2\n");
  r.Write("sys/class/infiniband/rocep1s0f0/ports/1/gids/4", "0000:0000:0000:0000:0000:0000:0000:0000\n");
  r.Write("etc/nccl.conf", "NCCL_IB_GID_INDEX=1\n");
}

Result<std::string> FakeCommands(const std::string& cmd) {
  if (cmd.rfind("nvidia-smi", 0) == 0) return std::string("NVIDIA GB10, 580.95.05, 2405, 3003, [N/A]\n");
  if (cmd.rfind("ip -j -4 addr", 0) == 0) {
    return std::string(R"([{"ifname":"enp1s0f0np0","addr_info":[{"local":"198.18.0.1","prefixlen":24}]}])");
  }
  if (cmd.rfind("iptables", 0) == 0) return std::string("-P INPUT ACCEPT\n-P FORWARD DROP\n-P OUTPUT ACCEPT\n");
  return AbortedError("unexpected command " + cmd);
}

TEST(FactsTest, GathersFromASparkTree) {
  FakeRoot root;
  WriteSpark(root);
  NodeFacts f = GatherFacts({.root = root.root(), .disk_path = "/", .run = FakeCommands});
  EXPECT_EQ(f.hostname, "spark-a");
  EXPECT_EQ(f.kernel, "6.17.0-1032-nvidia");
  EXPECT_EQ(f.os, "Ubuntu 24.04.3 LTS");
  EXPECT_EQ(f.dgx_release, "7.2.3");
  EXPECT_EQ(f.mem_total_kib, 127601732);
  EXPECT_EQ(f.cma_total_kib, 524288);
  EXPECT_EQ(f.memlock, "8192");
  EXPECT_TRUE(f.gpu.present);
  EXPECT_EQ(f.gpu.name, "NVIDIA GB10");
  EXPECT_EQ(f.gpu.max_sm_clock_mhz, 3003);
  ASSERT_EQ(f.rdma.size(), 1u);
  EXPECT_EQ(f.rdma[0].state, "ACTIVE");
  EXPECT_EQ(f.rdma[0].active_mtu, 4096);
  EXPECT_EQ(f.rdma[0].netdev, "enp1s0f0np0");
  EXPECT_EQ(f.rdma[0].gids.size(), 4u);  // the all-zero entry is skipped
  EXPECT_EQ(f.rdma[0].RoceV2Ipv4Index(), 3);
  ASSERT_EQ(f.netdevs.size(), 4u);
  EXPECT_TRUE(f.netdevs[0].present);
  EXPECT_EQ(f.netdevs[0].ipv4, (std::vector<std::string>{"198.18.0.1/24"}));
  EXPECT_FALSE(f.FindNetdev("enP2p1s0f1np1")->present);
  EXPECT_TRUE(f.nccl_conf_present);
  EXPECT_EQ(f.forward_policy, "DROP");
}

TEST(FactsTest, JsonRoundTrip) {
  FakeRoot root;
  WriteSpark(root);
  NodeFacts f = GatherFacts({.root = root.root(), .disk_path = "/", .run = FakeCommands});
  auto back = FactsFromJson(ToJson(f));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), ToJson(f));
  nlohmann::json broken = ToJson(f);
  broken.erase("kernel");
  EXPECT_FALSE(FactsFromJson(broken).ok());
}

TEST(FactsTest, Parsers) {
  EXPECT_EQ(MeminfoValueKib("MemTotal: 10 kB\nCmaTotal:        0 kB\n", "CmaTotal"), 0);
  EXPECT_EQ(MeminfoValueKib("MemTotal: 10 kB\n", "CmaTotal"), -1);
  EXPECT_EQ(MemlockFromLimits("Max locked memory         unlimited            unlimited            bytes\n"),
            "unlimited");
  EXPECT_EQ(ForwardPolicyFromIptables("-P FORWARD ACCEPT\n"), "ACCEPT");
  EXPECT_EQ(ForwardPolicyFromIptables(""), "");
  EXPECT_FALSE(GpuFromNvidiaSmi("garbage").present);
}

TEST(FactsTest, MissingTreeIsReportedNotFatal) {
  NodeFacts f = GatherFacts({.root = "/nonexistent-root", .disk_path = "/",
                             .run = [](const std::string&) -> Result<std::string> {
                               return NotFoundError("no such command");
                             }});
  EXPECT_EQ(f.kernel, "");
  EXPECT_EQ(f.cma_total_kib, -1);
  EXPECT_FALSE(f.gpu.present);
  EXPECT_NE(f.gpu.error.find("no such command"), std::string::npos);
  EXPECT_TRUE(f.rdma.empty());
}

}  // namespace
}  // namespace spark::host
