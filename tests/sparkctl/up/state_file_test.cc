#include "sparkctl/up/state_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("up-state-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

UpState Sample() {
  UpState s;
  s.cluster_file = "/etc/sparkctl/cluster.yaml";
  s.profile_file = "/srv/profiles/qwen3-tiny-demo.yaml";
  LaunchOptions o;
  o.nccl_env["spark-1"] = {{"NCCL_IB_GID_INDEX", "3"}};
  s.plan = *PlanLaunch(testing::DemoProfile(), testing::Ring(), o);
  s.pids = {{0, 11}, {1, 12}, {2, 13}, {3, 14}};
  s.systemd = {{0, false}, {1, true}, {2, false}, {3, false}};
  s.started = 1764450000.5;
  s.restarts = 2;
  s.auto_recover = false;
  return s;
}

TEST_F(StateFileTest, RoundTripsThroughTheDirectory) {
  const std::string dir = StateDir(root_.string(), "demo");
  EXPECT_EQ(dir, root_.string() + "/demo");
  EXPECT_EQ(LoadState(dir).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(SaveState(dir, Sample()).ok());
  auto back = LoadState(dir);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), ToJson(Sample()));
  EXPECT_EQ(back->plan.hash, Sample().plan.hash);
  EXPECT_EQ(back->plan.ranks[1].env[0].value, "3");
  EXPECT_EQ(back->pids.at(3), 14);
  EXPECT_TRUE(back->systemd.at(1));
  EXPECT_FALSE(back->auto_recover);
  EXPECT_EQ(LoadLastState(dir).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(RemoveState(dir).ok());
  EXPECT_EQ(LoadState(dir).status().code(), StatusCode::kNotFound);
  auto last = LoadLastState(dir);
  ASSERT_TRUE(last.ok()) << "down keeps the record for `sparkctl logs`";
  EXPECT_EQ(last->plan.hash, Sample().plan.hash);
  EXPECT_TRUE(RemoveState(dir).ok()) << "removing twice is fine";
}

TEST_F(StateFileTest, ForeignOrBrokenFilesNameTheFile) {
  auto wrong = ParseState(R"({"schema":"something-else"})", "/x/state.json");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("/x/state.json"), std::string::npos);
  auto broken = ParseState(R"({"schema":"sparkctl-up-state/v1","plan":{}})", "/x/state.json");
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseState("not json", "/x/state.json").ok());
}

}  // namespace
}  // namespace spark::up
