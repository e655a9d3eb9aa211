// `sparkctl host pin` and `host unpin` against the simulator (label sim, root): plan, refusal
// without --yes, apply (apt-mark holds of the kernel and meta packages, GRUB_DEFAULT honoured
// by update-grub's grub.cfg), idempotence, a node that booted another kernel than its pin, unpin
// back to nothing, and a node on a denied kernel left unpinned. Each node's /etc and /boot are
// its own, and apt-mark/dpkg-query/update-grub are the simulator's stand-ins over an emulated
// dpkg database, so nothing reaches the host.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
const std::string kName = "pin3";
const std::string kSeed = "/run/sparkctl-sim/pin3/cluster.yaml";
const std::string kProfile = "/tmp/sparkctl-pin3-profile.yaml";

using spark::testing::Output;

Output Sh(const std::string& command) { return spark::testing::Shell(command); }

nlohmann::json Json(const Output& o) {
  try {
    return nlohmann::json::parse(o.out);
  } catch (const nlohmann::json::exception&) {
    ADD_FAILURE() << "not JSON: " << o.out.substr(0, 400);
    return {};
  }
}

// The demo profile with kho=off added to the kernel options.
bool WriteProfile() {
  std::ifstream in(SPARK_SOURCE_DIR "/profiles/qwen3-tiny-demo.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  size_t at = s.find("    allow: [");
  if (at == std::string::npos) return false;
  s.insert(at, "    cmdline: [kho=off]\n");
  std::ofstream(kProfile) << s;
  return true;
}

class PinSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it (a test binary without it is broken, not skipped)";
    ASSERT_TRUE(WriteProfile());
    Sh(kSparkctl + " sim destroy --name " + kName);
    created_ = Sh(kSparkctl + " sim create --name " + kName + " --nodes 2 --topology pair")
                   .exit_code == 0;
    ASSERT_TRUE(created_) << "sim create failed";
  }
  void TearDown() override {
    if (created_) Sh(kSparkctl + " sim destroy --name " + kName);
    unlink(kProfile.c_str());
  }
  Output Pin(const std::string& flags) {
    return Sh(kSparkctl + " host pin -c " + kSeed + " -p " + kProfile + " --json " + flags +
              " </dev/null");
  }
  Output Exec(const std::string& node, const std::string& cmd) {
    return Sh(kSparkctl + " sim exec --name " + kName + " " + node + " -- " + cmd);
  }
  bool created_ = false;
};

TEST_F(PinSimTest, PlanApplyIdempotentAndDeniedKernel) {
  const std::string kernel_file = "/etc/apt/preferences.d/sparkctl-kernel";
  Output plan = Pin("--plan");
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  EXPECT_GT(Json(plan)["changes"].get<int>(), 0);
  EXPECT_NE(Exec("spark-0", "test -e " + kernel_file).exit_code, 0) << "--plan wrote a file";

  EXPECT_EQ(Pin("").exit_code, 3) << "no --yes and no terminal must ask";

  Output apply = Pin("--yes");
  ASSERT_EQ(apply.exit_code, 0) << apply.out;
  auto applied = Json(apply);
  EXPECT_TRUE(applied["applied"].get<bool>());
  EXPECT_EQ(applied["reboot"].size(), 2u) << "the host's /proc/cmdline has no kho=off";
  Output pinned = Exec("spark-1", "cat " + kernel_file);
  EXPECT_NE(pinned.out.find("linux-image-6.17.0-1031-nvidia"), std::string::npos) << pinned.out;
  Output grub = Exec("spark-1", "cat /etc/default/grub.d/99-sparkctl.cfg");
  EXPECT_NE(grub.out.find("kho=off"), std::string::npos) << grub.out;

  // The kernel is held: its packages and the meta packages that would pull a newer one.
  Output held = Exec("spark-1", "apt-mark showhold");
  for (const char* p : {"linux-image-6.17.0-1031-nvidia", "linux-modules-6.17.0-1031-nvidia",
                        "linux-headers-6.17.0-1031-nvidia", "linux-image-nvidia",
                        "linux-headers-nvidia", "linux-nvidia"}) {
    EXPECT_NE(held.out.find(std::string(p) + "\n"), std::string::npos) << p << " in " << held.out;
  }
  EXPECT_EQ(held.out.find("1032"), std::string::npos) << held.out;
  // GRUB boots the pinned kernel next time: the drop-in, and update-grub's grub.cfg.
  Output def = Exec("spark-1", "cat /etc/default/grub.d/99-sparkctl-default.cfg");
  EXPECT_NE(def.out.find("GRUB_DEFAULT=\"gnulinux-advanced-"), std::string::npos) << def.out;
  EXPECT_NE(def.out.find(">gnulinux-6.17.0-1031-nvidia-advanced-"), std::string::npos) << def.out;
  Output cfg = Exec("spark-1", "grep -m1 default= /boot/grub/grub.cfg");
  EXPECT_NE(cfg.out.find(">gnulinux-6.17.0-1031-nvidia-advanced-"), std::string::npos) << cfg.out;

  Output again = Pin("--plan");
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_EQ(Json(again)["changes"].get<int>(), 0) << again.out;

  // After a reboot the node runs another (allowed) kernel than the one it is pinned to: said.
  ASSERT_EQ(Sh(kSparkctl + " sim fault --name " + kName + " kernel spark-1 6.17.0-1032-nvidia")
                .exit_code, 0);
  Output other = Pin("--yes");
  EXPECT_EQ(other.exit_code, 2) << other.out;
  for (const auto& n : Json(other)["nodes"]) {
    const std::string blocked = n["kernel_blocked"];
    if (n["node"] == "spark-1") {
      EXPECT_NE(blocked.find("booted kernel 6.17.0-1032-nvidia but it is pinned to "
                             "6.17.0-1031-nvidia"), std::string::npos) << n.dump();
    } else {
      EXPECT_EQ(blocked, "") << n.dump();
    }
  }
  ASSERT_EQ(Sh(kSparkctl + " sim fault --name " + kName + " kernel spark-1 default").exit_code, 0);

  // unpin takes all of it off again.
  Output unpin = Sh(kSparkctl + " host unpin -c " + kSeed + " --json --yes </dev/null");
  ASSERT_EQ(unpin.exit_code, 0) << unpin.out;
  EXPECT_EQ(Exec("spark-1", "apt-mark showhold").out, "");
  for (const char* f : {"/etc/apt/preferences.d/sparkctl-kernel", "/etc/sparkctl/host/pin",
                        "/etc/default/grub.d/99-sparkctl-default.cfg",
                        "/etc/default/grub.d/99-sparkctl.cfg",
                        "/etc/security/limits.d/99-sparkctl-memlock.conf"}) {
    EXPECT_NE(Exec("spark-1", std::string("test -e ") + f).exit_code, 0) << f << " left";
  }
  EXPECT_EQ(Exec("spark-1", "grep -m1 default= /boot/grub/grub.cfg").out, "set default=\"0\"\n");
  Output unpinned = Sh(kSparkctl + " host unpin -c " + kSeed + " --json --plan");
  EXPECT_EQ(Json(unpinned)["changes"].get<int>(), 0) << unpinned.out;
  ASSERT_EQ(Pin("--yes").exit_code, 0) << "pin again after unpin";

  ASSERT_EQ(Sh(kSparkctl + " sim fault --name " + kName + " kernel spark-1 7.0.0-1019-nvidia")
                .exit_code,
            0);
  Output denied = Pin("--yes");
  EXPECT_EQ(denied.exit_code, 2);
  for (const auto& n : Json(denied)["nodes"]) {
    bool blocked = !n["kernel_blocked"].get<std::string>().empty();
    EXPECT_EQ(blocked, n["node"] == "spark-1") << n.dump();
  }
}

}  // namespace
