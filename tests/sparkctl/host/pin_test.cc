#include "sparkctl/host/pin.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sparkctl/ssh/testing/fake_transport.h"

namespace spark::host {
namespace {

constexpr char kGood[] = "6.17.0-1031-nvidia";
constexpr char kBad[] = "7.0.0-1019-nvidia";

profile::HostSpec Host() {
  profile::HostSpec h;
  h.kernel_allow = {"6.17.0-1031-nvidia", "6.17.0-1032-nvidia"};
  h.kernel_deny = {{kBad, "CmaTotal is 0 kB", "boot 6.17.0-1032-nvidia"}};
  h.kernel_cmdline = {"kho=off"};
  h.memlock = "unlimited";
  return h;
}

// grub.cfg as grub-mkconfig writes it on Ubuntu: a simple entry, then the advanced submenu.
constexpr char kGrubCfg[] = R"(set default="0"
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-u1' {
	linux	/boot/vmlinuz-6.17.0-1032-nvidia root=UUID=u1 ro
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-u1' {
	menuentry 'Ubuntu, with Linux 6.17.0-1032-nvidia' --class ubuntu $menuentry_id_option 'gnulinux-6.17.0-1032-nvidia-advanced-u1' {
		linux	/boot/vmlinuz-6.17.0-1032-nvidia root=UUID=u1 ro
	}
	menuentry 'Ubuntu, with Linux 6.17.0-1031-nvidia (recovery mode)' --class ubuntu $menuentry_id_option 'gnulinux-6.17.0-1031-nvidia-recovery-u1' {
		linux	/boot/vmlinuz-6.17.0-1031-nvidia root=UUID=u1 ro recovery
	}
	menuentry 'Ubuntu, with Linux 6.17.0-1031-nvidia' --class ubuntu $menuentry_id_option 'gnulinux-6.17.0-1031-nvidia-advanced-u1' {
		linux	/boot/vmlinuz-6.17.0-1031-nvidia root=UUID=u1 ro
	}
}
)";

std::map<std::string, std::string> Packages() {
  return {{"linux-image-6.17.0-1031-nvidia", "linux-modules-6.17.0-1031-nvidia"},
          {"linux-modules-6.17.0-1031-nvidia", ""},
          {"linux-headers-6.17.0-1031-nvidia", "linux-nvidia-headers-6.17.0-1031"},
          {"linux-image-6.17.0-1032-nvidia", "linux-modules-6.17.0-1032-nvidia"},
          {"linux-modules-6.17.0-1032-nvidia", ""},
          {"linux-image-nvidia", "linux-image-6.17.0-1031-nvidia"},
          {"linux-nvidia", "linux-image-nvidia (= 6.17.0.1031.31), linux-firmware | wireless"},
          {"linux-firmware", ""}};
}

PinNodeInput Input(const std::string& release = kGood, const std::string& cmdline = "ro quiet") {
  PinNodeInput in;
  in.node = "spark-1";
  in.kernel_release = release;
  in.proc_cmdline = "BOOT_IMAGE=/vmlinuz-" + release + " " + cmdline;
  in.systemd = true;
  in.packages = Packages();
  in.grub_cfg = kGrubCfg;
  return in;
}

const PinFileChange* Find(const PinNodePlan& plan, const std::string& path) {
  for (const auto& c : plan.changes) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

// The node after the plan was applied: what a second read would see.
PinNodeInput Applied(PinNodeInput in, const PinNodePlan& plan) {
  for (const auto& c : plan.changes) in.files[c.path] = c.contents;
  for (const auto& p : plan.hold) in.held.push_back(p);
  for (const auto& p : plan.unhold) std::erase(in.held, p);
  return in;
}

TEST(PinPlanTest, FreshNodeGetsEveryFile) {
  auto plan = PlanPin(Host(), Input());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->changes.size(), 6u);
  EXPECT_TRUE(plan->problems.empty());
  EXPECT_TRUE(plan->kernel_blocked.empty());
  EXPECT_TRUE(plan->run_update_grub);
  EXPECT_TRUE(plan->reload_systemd);
  const PinFileChange* kernel = Find(*plan, kPinKernelPath);
  ASSERT_NE(kernel, nullptr);
  const std::string& text = *kernel->contents;
  EXPECT_NE(text.find("Package: linux-image-6.17.0-1031-nvidia linux-modules-6.17.0-1031-nvidia "
                      "linux-headers-6.17.0-1031-nvidia\nPin: version *\nPin-Priority: 1001\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Package: linux-image-7.0.0-1019-nvidia linux-modules-7.0.0-1019-nvidia "
                      "linux-headers-7.0.0-1019-nvidia\nPin: version *\nPin-Priority: -1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(Find(*plan, kPinGrubPath)->contents->find(
                "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT kho=off\"\n"),
            std::string::npos);
  EXPECT_NE(Find(*plan, kPinLimitsPath)->contents->find("* - memlock unlimited\n"),
            std::string::npos);
  EXPECT_NE(Find(*plan, kPinSystemdPath)->contents->find("LimitMEMLOCK=infinity\n"),
            std::string::npos);
  EXPECT_EQ(plan->grub_default, "gnulinux-advanced-u1>gnulinux-6.17.0-1031-nvidia-advanced-u1");
  EXPECT_NE(Find(*plan, kPinGrubDefaultPath)->contents->find(
                "GRUB_DEFAULT=\"gnulinux-advanced-u1>gnulinux-6.17.0-1031-nvidia-advanced-u1\"\n"),
            std::string::npos);
  EXPECT_EQ(plan->hold, (std::vector<std::string>{
                            "linux-headers-6.17.0-1031-nvidia", "linux-image-6.17.0-1031-nvidia",
                            "linux-image-nvidia", "linux-modules-6.17.0-1031-nvidia",
                            "linux-nvidia"}));
  EXPECT_NE(Find(*plan, kPinRecordPath)->contents->find("release 6.17.0-1031-nvidia\n"),
            std::string::npos);
}

TEST(PinPlanTest, TheMemlockDropInCoversTheUnitsUpStarts) {
  // up's rank units are sparkctl-<cluster>-rank<R>.service; systemd applies a drop-in in
  // "<prefix>-.service.d/" to every unit whose name starts with "<prefix>-".
  const std::string dir = std::string(kPinSystemdPath).substr(0, std::string(kPinSystemdPath).rfind('/'));
  EXPECT_EQ(dir, "/etc/systemd/system/sparkctl-.service.d");
  PinNodeInput in = Input();
  in.files[kPinOldSystemdPath] = "[Service]\nLimitMEMLOCK=infinity\n";
  auto plan = PlanPin(Host(), in);
  ASSERT_TRUE(plan.ok());
  const PinFileChange* old = Find(*plan, kPinOldSystemdPath);
  ASSERT_NE(old, nullptr) << "the drop-in of a unit nothing starts is removed";
  EXPECT_FALSE(old->contents.has_value());
  EXPECT_TRUE(plan->reload_systemd);
}

TEST(PinPlanTest, HoldsTheRunningKernelAndItsMetaPackagesOnly) {
  EXPECT_EQ(KernelHoldPackages(Packages(), "6.17.0-1032-nvidia"),
            (std::vector<std::string>{"linux-image-6.17.0-1032-nvidia",
                                      "linux-modules-6.17.0-1032-nvidia"}))
      << "the meta packages point at 1031";
  EXPECT_TRUE(KernelHoldPackages(Packages(), "6.8.0-1-generic").empty());
}

TEST(PinPlanTest, FindsTheNormalEntryInsideTheSubmenu) {
  EXPECT_EQ(GrubEntryFor(kGrubCfg, "6.17.0-1032-nvidia"),
            "gnulinux-advanced-u1>gnulinux-6.17.0-1032-nvidia-advanced-u1");
  EXPECT_EQ(GrubEntryFor(kGrubCfg, "7.0.0-1019-nvidia"), "");
  EXPECT_EQ(GrubEntryFor("menuentry 'X' $menuentry_id_option 'gnulinux-5.0-advanced-z' {\n}\n",
                         "5.0"),
            "gnulinux-5.0-advanced-z");
}

TEST(PinPlanTest, NoGrubEntryOrNoPackageIsAProblemNotASilentSkip) {
  PinNodeInput in = Input();
  in.grub_cfg = "";
  in.packages.erase("linux-image-6.17.0-1031-nvidia");
  auto plan = PlanPin(Host(), in);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->problems.size(), 2u);
  EXPECT_NE(plan->problems[0].find("no installed package linux-image-6.17.0-1031-nvidia"),
            std::string::npos) << plan->problems[0];
  EXPECT_NE(plan->problems[1].find("/boot/grub/grub.cfg has no menu entry for 6.17.0-1031"),
            std::string::npos) << plan->problems[1];
}

TEST(PinPlanTest, ABootIntoAnotherKernelThanThePinIsReported) {
  auto pinned = PlanPin(Host(), Input());
  ASSERT_TRUE(pinned.ok());
  PinNodeInput rebooted = Applied(Input(), *pinned);
  rebooted.kernel_release = "6.17.0-1032-nvidia";  // allowed, but not the pinned one
  auto plan = PlanPin(Host(), rebooted);
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->kernel_blocked.find("booted kernel 6.17.0-1032-nvidia but it is pinned to "
                                      "6.17.0-1031-nvidia"), std::string::npos)
      << plan->kernel_blocked;
  EXPECT_TRUE(plan->hold.empty()) << "nothing of the kernel pin changes";
}

TEST(PinPlanTest, UnpinRemovesEverythingAndUnholdsTheRecordedPackages) {
  auto pinned = PlanPin(Host(), Input());
  ASSERT_TRUE(pinned.ok());
  PinNodeInput node = Applied(Input(), *pinned);
  node.held.push_back("some-other-package");
  PinNodePlan unpin = PlanUnpin(node);
  EXPECT_EQ(unpin.changes.size(), pinned->changes.size());
  for (const auto& c : unpin.changes) EXPECT_FALSE(c.contents.has_value()) << c.path;
  EXPECT_EQ(unpin.unhold, pinned->hold) << "the user's own holds stay";
  EXPECT_TRUE(unpin.run_update_grub);
  EXPECT_TRUE(unpin.reload_systemd);
  PinNodeInput after = Applied(node, unpin);
  for (const auto& path : PinManagedPaths()) after.files.erase(path);
  PinNodePlan again = PlanUnpin(after);
  EXPECT_TRUE(again.changes.empty());
  EXPECT_TRUE(again.unhold.empty());
}

TEST(PinPlanTest, SecondRunPlansNothing) {
  PinNodeInput in = Input(kGood, "ro kho=off");
  auto first = PlanPin(Host(), in);
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->changes.empty());
  auto second = PlanPin(Host(), Applied(in, *first));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->changes.empty());
  EXPECT_FALSE(second->run_update_grub);
  EXPECT_FALSE(second->reload_systemd);
  EXPECT_FALSE(second->NeedsReboot());
}

TEST(PinPlanTest, CmdlineOptionMissingNeedsReboot) {
  auto plan = PlanPin(Host(), Input(kGood, "ro quiet"));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->NeedsReboot());
  EXPECT_EQ(plan->missing_cmdline, std::vector<std::string>{"kho=off"});
  // Already written but not booted yet: no change, still a reboot.
  auto again = PlanPin(Host(), Applied(Input(kGood, "ro quiet"), *plan));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->changes.empty());
  EXPECT_TRUE(again->NeedsReboot());
}

TEST(PinPlanTest, CmdlineOptionPresentNeedsNoReboot) {
  auto plan = PlanPin(Host(), Input(kGood, "ro kho=off quiet"));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->NeedsReboot());
  // A prefix is not the option.
  auto prefix = PlanPin(Host(), Input(kGood, "ro kho=offx"));
  ASSERT_TRUE(prefix.ok());
  EXPECT_TRUE(prefix->NeedsReboot());
}

TEST(PinPlanTest, DeniedKernelIsNotPinned) {
  auto plan = PlanPin(Host(), Input(kBad));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, kPinKernelPath), nullptr);
  EXPECT_NE(plan->kernel_blocked.find("7.0.0-1019-nvidia is denied"), std::string::npos);
  EXPECT_NE(plan->kernel_blocked.find("boot 6.17.0-1031-nvidia first"), std::string::npos)
      << plan->kernel_blocked;
  // The other settings (kho=off is the fix for this very kernel) are still planned.
  EXPECT_NE(Find(*plan, kPinGrubPath), nullptr);
}

TEST(PinPlanTest, KernelOutsideAllowListIsNotPinned) {
  auto plan = PlanPin(Host(), Input("6.11.0-1016-nvidia"));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, kPinKernelPath), nullptr);
  EXPECT_NE(plan->kernel_blocked.find("not in the profile's allow list"), std::string::npos);
}

TEST(PinPlanTest, EmptyAllowListAllowsAnyKernelNotDenied) {
  profile::HostSpec h = Host();
  h.kernel_allow.clear();
  auto plan = PlanPin(h, Input("6.11.0-1016-nvidia"));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->kernel_blocked.empty());
  EXPECT_NE(Find(*plan, kPinKernelPath), nullptr);
}

TEST(PinPlanTest, NoCmdlineRemovesOurGrubFileOnly) {
  profile::HostSpec h = Host();
  h.kernel_cmdline.clear();
  auto fresh = PlanPin(h, Input());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(Find(*fresh, kPinGrubPath), nullptr);
  EXPECT_TRUE(fresh->run_update_grub) << "GRUB_DEFAULT still points at the pinned kernel";
  PinNodeInput in = Input();
  in.files[kPinGrubPath] = "old\n";
  auto stale = PlanPin(h, in);
  ASSERT_TRUE(stale.ok());
  ASSERT_NE(Find(*stale, kPinGrubPath), nullptr);
  EXPECT_FALSE(Find(*stale, kPinGrubPath)->contents.has_value());
  EXPECT_TRUE(stale->run_update_grub);
}

TEST(PinPlanTest, MemlockInKibAndNoSystemd) {
  profile::HostSpec h = Host();
  h.memlock = "67108864";
  PinNodeInput in = Input();
  in.systemd = false;
  auto plan = PlanPin(h, in);
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(Find(*plan, kPinLimitsPath)->contents->find("* - memlock 67108864\n"),
            std::string::npos);
  EXPECT_EQ(Find(*plan, kPinSystemdPath), nullptr);
  EXPECT_FALSE(plan->reload_systemd);
}

TEST(PinPlanTest, RejectsUnsafeValues) {
  profile::HostSpec h = Host();
  h.kernel_cmdline = {"kho=off\" init=/bin/sh"};
  EXPECT_EQ(PlanPin(h, Input()).status().code(), StatusCode::kInvalidArgument);
  h = Host();
  h.memlock = "lots";
  EXPECT_EQ(PlanPin(h, Input()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanPin(Host(), Input("6.17; rm -rf /")).status().code(),
            StatusCode::kInvalidArgument);
}

class PinApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string probe = std::string(kGood) + "\nBOOT_IMAGE=/vmlinuz ro quiet\nsystemd\n@@packages\n";
    for (const auto& [name, deps] : Packages()) probe += "ii \t" + name + "\t" + deps + "\n";
    probe += "@@held\n@@end\n";
    fake_.Reply("*", "cat /proc/sys/kernel/osrelease.*", probe);
    fake_.Reply("*", "apt-mark hold .*", "");
    fake_.SetFile("spark-1", kGrubCfgPath, kGrubCfg);
    fake_.Reply("*", "mkdir -p .*", "");
    fake_.Reply("*", "update-grub", "");
    fake_.Reply("*", "systemctl daemon-reload", "");
  }
  ssh::testing::FakeTransport fake_{{"spark-1"}};
};

TEST_F(PinApplyTest, WritesChangedFilesThenIsIdempotent) {
  fake_.SetFile("spark-1", kPinLimitsPath, "* - memlock 64\n");
  auto in = ReadPinInput(fake_, "spark-1");
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->kernel_release, kGood);
  EXPECT_TRUE(in->systemd);
  EXPECT_EQ(in->files[kPinLimitsPath], std::optional<std::string>("* - memlock 64\n"));
  EXPECT_EQ(in->files[kPinKernelPath], std::nullopt);
  auto plan = PlanPin(Host(), *in);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(ApplyPin(fake_, *plan).ok());
  for (const auto& c : plan->changes) EXPECT_EQ(fake_.GetFile("spark-1", c.path), c.contents);
  std::vector<std::string> cmds = fake_.CommandsOn("spark-1");
  EXPECT_EQ(std::count(cmds.begin(), cmds.end(), "update-grub"), 1);
  EXPECT_EQ(std::count(cmds.begin(), cmds.end(), "systemctl daemon-reload"), 1);

  fake_.ClearCalls();
  auto again = ReadPinInput(fake_, "spark-1");
  ASSERT_TRUE(again.ok());
  auto plan2 = PlanPin(Host(), *again);
  ASSERT_TRUE(plan2.ok());
  EXPECT_TRUE(plan2->changes.empty());
  ASSERT_TRUE(ApplyPin(fake_, *plan2).ok());
  for (const auto& call : fake_.calls()) {
    EXPECT_EQ(call.command.rfind("write ", 0), std::string::npos) << call.command;
    EXPECT_NE(call.command, "update-grub");
  }
}

TEST_F(PinApplyTest, FailingUpdateGrubIsReported) {
  fake_.Reply("spark-1", "update-grub", "", 1);
  auto in = ReadPinInput(fake_, "spark-1");
  ASSERT_TRUE(in.ok());
  auto plan = PlanPin(Host(), *in);
  ASSERT_TRUE(plan.ok());
  Status s = ApplyPin(fake_, *plan);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("spark-1"), std::string::npos) << s.message();
}

TEST_F(PinApplyTest, UnreadableFileIsAnError) {
  fake_.SetNodeDown("spark-1", UnavailableError("spark-1: unreachable"));
  EXPECT_EQ(ReadPinInput(fake_, "spark-1").status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace spark::host
