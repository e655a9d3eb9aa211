// Lossless-RoCE settings: parsing what dcb and the mlx5 ECN knobs print, and the commands that
// set and clear them. Pure.
#include "sparkctl/fabric/roce_qos.h"

#include <gtest/gtest.h>

namespace spark::fabric {
namespace {

std::string Section(const std::string& dev, const std::string& pfc, const std::string& trust,
                    const std::string& app, const std::string& np, const std::string& rp) {
  return "@@dev " + dev + "\n@@pfc " + pfc + "\n@@trust " + trust + "\n@@app " + app +
         "\n@@np " + np + "\n@@rp " + rp + "\n";
}

constexpr char kGoodPfc[] = "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off";

TEST(RoceQosTest, AllSetIsOk) {
  auto s = ParseQosProbe({"enp1s0f0np0"},
                         Section("enp1s0f0np0", kGoodPfc, "order: dscp", "dscp-prio 26:3", "1", "1"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].ok()) << s[0].Missing();
  EXPECT_EQ(s[0].Missing(), "");
}

TEST(RoceQosTest, EveryMissingPieceIsNamed) {
  auto s = ParseQosProbe(
      {"a", "b"},
      Section("a", "prio-pfc 0:off 1:off 2:off 3:off 4:on 5:off 6:off 7:off", "order: pcp dscp",
              "dscp-prio 26:4", "0", "cat: /sys/class/net/a/ecn/roce_rp/enable/3: No such file"));
  EXPECT_FALSE(s[0].ok());
  EXPECT_EQ(s[0].Missing(),
            "PFC off on priority 3, PFC on other priorities too, trust is not DSCP, DSCP 26 not "
            "mapped to priority 3, ECN notification point off, ECN reaction point off");
  EXPECT_FALSE(s[1].read) << "a netdev the probe did not print is not silently ok";
  EXPECT_EQ(s[1].Missing(), "not read");
}

TEST(RoceQosTest, ADeviceWithoutDcbIsNotOk) {
  auto s = ParseQosProbe({"a"}, Section("a", "Error: a: Operation not supported", "", "", "", ""));
  EXPECT_FALSE(s[0].ok());
  EXPECT_NE(s[0].raw.find("Operation not supported"), std::string::npos);
}

TEST(RoceQosTest, CommandsSetAndClearPriorityThree) {
  std::string set = QosApplyCommands({"enp1s0f0np0"});
  EXPECT_NE(set.find("dcb pfc set dev 'enp1s0f0np0' prio-pfc all:off 3:on\n"), std::string::npos)
      << set;
  EXPECT_NE(set.find("dcb apptrust set dev 'enp1s0f0np0' order dscp\n"), std::string::npos);
  EXPECT_NE(set.find("dcb app replace dev 'enp1s0f0np0' dscp-prio 26:3\n"), std::string::npos);
  EXPECT_NE(set.find("echo 1 > /sys/class/net/enp1s0f0np0/ecn/roce_np/enable/3\n"),
            std::string::npos);
  EXPECT_NE(set.find("echo 1 > /sys/class/net/enp1s0f0np0/ecn/roce_rp/enable/3\n"),
            std::string::npos);
  std::string reset = QosResetCommands({"enp1s0f0np0"});
  EXPECT_NE(reset.find("prio-pfc all:off 2>/dev/null || true"), std::string::npos) << reset;
  EXPECT_NE(reset.find("dcb app flush dev 'enp1s0f0np0' dscp-prio"), std::string::npos);
  EXPECT_EQ(kNcclIbTc >> 2, kRoceDscp) << "NCCL_IB_TC carries the DSCP the NIC maps";
}

}  // namespace
}  // namespace spark::fabric
