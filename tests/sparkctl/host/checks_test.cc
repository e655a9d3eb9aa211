#include "sparkctl/host/checks.h"

#include <gtest/gtest.h>

#include <functional>

#include "sparkctl/profile/profile_yaml.h"

namespace spark::host {
namespace {

NodeFacts Healthy(const std::string& name, int index) {
  NodeFacts f;
  f.hostname = name;
  f.machine_id = std::string(31, '0') + std::to_string(index);
  f.kernel = "6.17.0-1032-nvidia";
  f.os = "Ubuntu 24.04.3 LTS";
  f.mem_total_kib = 127'000'000;
  f.mem_available_kib = 120'000'000;
  f.cma_total_kib = 524'288;
  f.memlock = "unlimited";
  f.gpu = {true, "NVIDIA GB10", "580.95.05", 2405, 3003, 0, ""};
  f.disk_path = "/var/lib/sparkctl/models/m";
  f.disk_free_bytes = int64_t{2000} << 30;
  f.forward_policy = "ACCEPT";
  int subnet = 0;
  for (const auto& port : netplan::kPortTwins) {
    for (const auto& twin : port) {
      std::string ip = "198.18." + std::to_string(subnet++) + ".1";
      f.netdevs.push_back({twin.netdev, true, "up", 9000, {ip + "/24"}});
      RdmaDeviceFacts r{twin.rdma_device, twin.netdev, "ACTIVE", 4096, {}};
      r.gids = {{0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", twin.netdev},
                {3, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", twin.netdev}};
      f.rdma.push_back(r);
    }
  }
  return f;
}

netplan::ClusterSpec Ring3() {
  netplan::ClusterSpec c;
  c.name = "lab";
  c.fabric.kind = netplan::TopologyKind::kRing;
  for (int r = 0; r < 3; ++r) {
    netplan::NodeSpec n{"spark-" + std::to_string(r), "198.19.0.1" + std::to_string(r), "", r, {}};
    n.ports = {{"p0", netplan::PortPeer{"spark-" + std::to_string((r + 1) % 3), "p1"}},
               {"p1", netplan::PortPeer{"spark-" + std::to_string((r + 2) % 3), "p0"}}};
    c.nodes.push_back(n);
  }
  return c;
}

profile::Profile DemoProfile() {
  auto p = profile::LoadProfileFile(SPARK_SOURCE_DIR "/profiles/deepseek-v41-flash-tp4-ring.yaml");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

std::vector<CheckResult> RunPreflight(const std::function<void(std::vector<NodeObservation>&)>& mutate) {
  static const netplan::ClusterSpec cluster = Ring3();
  static const profile::Profile profile = DemoProfile();
  PreflightInput in;
  in.cluster = &cluster;
  in.profile = &profile;
  for (int i = 0; i < 3; ++i) in.nodes.push_back({"spark-" + std::to_string(i), Healthy("spark-" + std::to_string(i), i)});
  mutate(in.nodes);
  return RunChecks(in);
}

const CheckResult* Find(const std::vector<CheckResult>& results, const std::string& id, const std::string& node) {
  for (const auto& r : results) {
    if (r.id == id && r.node == node) return &r;
  }
  return nullptr;
}

TEST(ChecksTest, HealthyClusterPasses) {
  auto results = RunPreflight([](auto&) {});
  for (const auto& r : results) {
    EXPECT_EQ(r.verdict, Verdict::kOk) << r.id << " " << r.node << ": " << r.seen << " / " << r.hint;
  }
  EXPECT_FALSE(AnyFailed(results));
  EXPECT_NE(Find(results, "ROCE.GID_V2_IPV4", "spark-1")->seen.find("=3"), std::string::npos);
}

struct Case {
  const char* name;
  std::function<void(NodeFacts&)> mutate;
  const char* check;
  Verdict verdict;
  const char* hint_part;
};

class ChecksCaseTest : public testing::TestWithParam<Case> {};

TEST_P(ChecksCaseTest, CatchesTheTrapOnTheRightNode) {
  const Case& c = GetParam();
  auto results = RunPreflight([&](auto& nodes) { c.mutate(*nodes[1].facts); });
  const CheckResult* r = Find(results, c.check, "spark-1");
  ASSERT_NE(r, nullptr) << c.check;
  EXPECT_EQ(r->verdict, c.verdict) << r->seen;
  EXPECT_NE(r->hint.find(c.hint_part), std::string::npos) << r->hint;
  // The healthy neighbours are not blamed.
  const CheckResult* other = Find(results, c.check, "spark-0");
  if (other && std::string(c.check) != "MACHINE_ID.UNIQUE") {
    EXPECT_EQ(other->verdict, Verdict::kOk);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Traps, ChecksCaseTest,
    testing::Values(
        Case{"DeniedKernel", [](NodeFacts& f) { f.kernel = "7.0.0-1019-nvidia"; }, "KERNEL.ALLOWED",
             Verdict::kFail, "kho=off"},
        Case{"KernelNotAllowed", [](NodeFacts& f) { f.kernel = "6.8.0-40-generic"; }, "KERNEL.ALLOWED",
             Verdict::kFail, "allow list"},
        Case{"CmaZero", [](NodeFacts& f) { f.cma_total_kib = 0; }, "CMA.NONZERO", Verdict::kFail, "ENOMEM"},
        Case{"MemlockLow", [](NodeFacts& f) { f.memlock = "8192"; }, "MEMLOCK.UNLIMITED", Verdict::kFail,
             "memlock unlimited"},
        Case{"NoGpu", [](NodeFacts& f) { f.gpu = {}; }, "GPU.PRESENT", Verdict::kFail, "nvidia-smi"},
        Case{"ClockLatched", [](NodeFacts& f) { f.gpu.max_sm_clock_mhz = 900; }, "GPU.CLOCKS",
             Verdict::kWarn, "latched low"},
        Case{"LowMemory", [](NodeFacts& f) { f.mem_available_kib = 80'000'000; }, "MEMORY.HEADROOM",
             Verdict::kFail, "wedges"},
        Case{"DiskFull", [](NodeFacts& f) { f.disk_free_bytes = int64_t{100} << 30; }, "DISK.FREE",
             Verdict::kFail, "476 GiB"},
        Case{"LinkDown", [](NodeFacts& f) { f.netdevs[2].operstate = "down"; }, "FABRIC.LINK_UP",
             Verdict::kFail, "cable"},
        Case{"RdmaDown", [](NodeFacts& f) { f.rdma[1].state = "DOWN"; }, "RDMA.PORT_ACTIVE",
             Verdict::kFail, "not ACTIVE"},
        Case{"MtuLeftAt1500", [](NodeFacts& f) { f.netdevs[0].mtu = 1500; }, "FABRIC.MTU", Verdict::kFail,
             "net apply"},
        Case{"GidMissing", [](NodeFacts& f) { f.rdma[3].gids.pop_back(); }, "ROCE.GID_V2_IPV4",
             Verdict::kFail, "show_gids"},
        Case{"GidMoved", [](NodeFacts& f) { f.rdma[3].gids.back().index = 1; }, "ROCE.GID_V2_IPV4",
             Verdict::kWarn, "moves"},
        Case{"DuplicateMachineId", [](NodeFacts& f) { f.machine_id = std::string(31, '0') + "0"; },
             "MACHINE_ID.UNIQUE", Verdict::kFail, "systemd-machine-id-setup"},
        Case{"NcclConf", [](NodeFacts& f) { f.nccl_conf_present = true; f.nccl_conf = "NCCL_IB_HCA=mlx5"; },
             "NCCL_CONF.ABSENT", Verdict::kFail, "move it aside"},
        Case{"ForwardDrop", [](NodeFacts& f) { f.forward_policy = "DROP"; }, "FIREWALL.FORWARD",
             Verdict::kFail, "iptables -P FORWARD ACCEPT"}),
    [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ChecksTest, UnreachableNodeIsOneFailureNotAHang) {
  auto results = RunPreflight([](auto& nodes) { nodes[2].facts = UnavailableError("spark-2: unreachable: timed out"); });
  const CheckResult* r = Find(results, "SSH.REACHABLE", "spark-2");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->verdict, Verdict::kFail);
  EXPECT_EQ(Find(results, "CMA.NONZERO", "spark-2"), nullptr);
  EXPECT_EQ(Find(results, "CMA.NONZERO", "spark-0")->verdict, Verdict::kOk);
}

TEST(ChecksTest, CablingFindingsFail) {
  netplan::ClusterSpec cluster = Ring3();
  PreflightInput in;
  in.cluster = &cluster;
  in.nodes.push_back({"spark-0", Healthy("spark-0", 0)});
  in.cabling = std::vector<CablingFinding>{{"spark-1", "swap the two cables at spark-1"}};
  auto results = RunChecks(in);
  const CheckResult* r = Find(results, "FABRIC.CABLING", "spark-1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->verdict, Verdict::kFail);
  EXPECT_TRUE(AnyFailed(results));
  EXPECT_EQ(ToJson(results)["schema"], "sparkctl-preflight/v1");
}

}  // namespace
}  // namespace spark::host
