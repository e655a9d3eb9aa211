// RDMA checks from a fake sysfs tree, read with sparkctl/host's own gatherer (device
// enumeration, port state, active MTU, GID table), the verbs view's JSON, and the message given
// when no device can be opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sparkctl/host/facts_gather.h"
#include "sparkctl/selftest/selftest.h"

namespace spark::selftest {
namespace {

namespace fs = std::filesystem;
using host::Verdict;

class FakeSysfs {
 public:
  FakeSysfs() : root_(fs::temp_directory_path() / ("rdma-sysfs-" + std::to_string(getpid()))) {
    fs::remove_all(root_);
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  // A device with port 1 in `state`, `mtu`, and GIDs {index: (gid, type)} on `netdev`.
  void Device(const std::string& name, const std::string& netdev, const std::string& state,
              const std::string& mtu,
              const std::vector<std::tuple<int, std::string, std::string>>& gids) {
    fs::path d = root_ / "sys/class/infiniband" / name;
    fs::path p = d / "ports/1";
    fs::create_directories(p / "gids");
    fs::create_directories(p / "gid_attrs/types");
    fs::create_directories(p / "gid_attrs/ndevs");
    fs::create_directories(d / "device/net" / netdev);
    Write(p / "state", state);
    Write(p / "active_mtu", mtu);
    for (const auto& [i, gid, type] : gids) {
      Write(p / "gids" / std::to_string(i), gid);
      Write(p / "gid_attrs/types" / std::to_string(i), type);
      Write(p / "gid_attrs/ndevs" / std::to_string(i), netdev);
    }
  }
  host::NodeFacts Gather() const {
    host::GatherOptions o;
    o.root = root_.string();
    o.run = [](const std::string& cmd) -> Result<std::string> {
      return NotFoundError("no " + cmd + " in this test");
    };
    return host::GatherFacts(o);
  }

 private:
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text << "\n"; }
  fs::path root_;
};

const char kV4Gid[] = "0000:0000:0000:0000:0000:ffff:c612:0001";  // ::ffff:198.18.0.1
const char kLinkLocal[] = "fe80:0000:0000:0000:0a5c:7bff:fe00:0001";

const host::CheckResult* Find(const std::vector<host::CheckResult>& c, const std::string& id) {
  for (const auto& r : c)
    if (r.id == id) return &r;
  return nullptr;
}

TEST(RdmaChecksTest, EnumeratesDevicesAndGidTablesFromSysfs) {
  FakeSysfs sys;
  sys.Device("rocep1s0f0", "enp1s0f0np0", "4: ACTIVE", "4096 (5)",
             {{0, kLinkLocal, "IB/RoCE v1"}, {1, kLinkLocal, "RoCE v2"}, {2, kV4Gid, "IB/RoCE v1"},
              {3, kV4Gid, "RoCE v2"}});
  sys.Device("roceP2p1s0f0", "enP2p1s0f0np0", "1: DOWN", "1024 (3)", {{0, kLinkLocal, "IB/RoCE v1"}});
  host::NodeFacts f = sys.Gather();
  ASSERT_EQ(f.rdma.size(), 2u);
  const host::RdmaDeviceFacts* a = f.FindRdma("rocep1s0f0");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->netdev, "enp1s0f0np0");
  EXPECT_EQ(a->state, "ACTIVE");
  EXPECT_EQ(a->active_mtu, 4096);
  ASSERT_EQ(a->gids.size(), 4u);
  EXPECT_EQ(a->RoceV2Ipv4Index(), 3);
  EXPECT_FALSE(f.FindRdma("roceP2p1s0f0")->RoceV2Ipv4Index().has_value());

  // Verbs opened both and agree with sysfs on index 3.
  rdma::VerbsReport v;
  v.built_with_verbs = true;
  v.devices = {{"rocep1s0f0", true, "", {{1, "ACTIVE", 4096, {kLinkLocal, kLinkLocal, kV4Gid, kV4Gid}}}},
               {"roceP2p1s0f0", true, "", {{1, "DOWN", 1024, {kLinkLocal}}}}};
  auto checks = RdmaChecks("spark-0", f, v);
  EXPECT_EQ(Find(checks, "RDMA.DEVICES")->verdict, Verdict::kOk);
  EXPECT_EQ(Find(checks, "RDMA.ACTIVE_MTU")->verdict, Verdict::kOk);  // the DOWN port is not judged here
  EXPECT_EQ(Find(checks, "RDMA.VERBS")->verdict, Verdict::kOk);
  EXPECT_EQ(Find(checks, "RDMA.GID_TABLE"), nullptr);

  // Verbs sees a different GID at index 3: the table changed under us.
  v.devices[0].ports[0].gids[3] = kLinkLocal;
  checks = RdmaChecks("spark-0", f, v);
  ASSERT_NE(Find(checks, "RDMA.GID_TABLE"), nullptr);
  EXPECT_EQ(Find(checks, "RDMA.GID_TABLE")->verdict, Verdict::kFail);
  EXPECT_NE(Find(checks, "RDMA.GID_TABLE")->seen.find("rocep1s0f0 index 3"), std::string::npos);
}

TEST(RdmaChecksTest, SmallActiveMtuFailsWithTheFix) {
  FakeSysfs sys;
  sys.Device("rocep1s0f1", "enp1s0f1np1", "4: ACTIVE", "1024 (3)", {{3, kV4Gid, "RoCE v2"}});
  auto checks = RdmaChecks("spark-1", sys.Gather(), rdma::VerbsReport{});
  const auto* mtu = Find(checks, "RDMA.ACTIVE_MTU");
  ASSERT_NE(mtu, nullptr);
  EXPECT_EQ(mtu->verdict, Verdict::kFail);
  EXPECT_EQ(mtu->seen, "rocep1s0f1 1024");
  EXPECT_NE(mtu->hint.find("sparkctl net apply"), std::string::npos);
}

TEST(RdmaChecksTest, NoVerbsDeviceIsAWarningThatSaysTcp) {
  FakeSysfs sys;
  sys.Device("rocep1s0f0", "enp1s0f0np0", "4: ACTIVE", "4096 (5)", {{3, kV4Gid, "RoCE v2"}});
  rdma::VerbsReport v;
  v.built_with_verbs = true;
  v.note = "libibverbs found no device";
  auto checks = RdmaChecks("spark-2", sys.Gather(), v);
  const auto* verbs = Find(checks, "RDMA.VERBS");
  ASSERT_NE(verbs, nullptr);
  EXPECT_EQ(verbs->verdict, Verdict::kWarn);
  EXPECT_EQ(verbs->seen,
            "no RDMA verbs device usable here (libibverbs found no device); sysfs lists "
            "rocep1s0f0 but libibverbs cannot open them: check /dev/infiniband/uverbs*, the "
            "mlx5_ib module and the rdma-core provider (ibv_devices should list them). "
            "Measurements use TCP sockets instead, not RDMA.");
}

TEST(RdmaChecksTest, NoSysfsDeviceFails) {
  FakeSysfs sys;
  auto checks = RdmaChecks("spark-3", sys.Gather(), rdma::VerbsReport{});
  EXPECT_EQ(Find(checks, "RDMA.DEVICES")->verdict, Verdict::kFail);
  EXPECT_NE(rdma::NoVerbsDeviceMessage({}, {}).find("/sys/class/infiniband is empty"),
            std::string::npos);
}

TEST(RdmaChecksTest, VerbsReportSurvivesJson) {
  rdma::VerbsReport v;
  v.built_with_verbs = true;
  v.devices = {{"rocep1s0f0", false, "ibv_open_device failed", {}}};
  auto back = rdma::VerbsReportFromJson(rdma::ToJson(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->devices[0].error, "ibv_open_device failed");
  EXPECT_FALSE(back->AnyOpened());
  EXPECT_EQ(rdma::MtuEnumToBytes(5), 4096);
  EXPECT_EQ(rdma::MtuEnumToBytes(3), 1024);
  EXPECT_EQ(rdma::MtuEnumToBytes(0), 0);
  EXPECT_FALSE(rdma::VerbsReportFromJson(nlohmann::json::object()).ok());
}

}  // namespace
}  // namespace spark::selftest
