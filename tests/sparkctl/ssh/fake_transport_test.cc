// FakeTransport, RunAll and EnsureFileOnNode against the fake.
#include "sparkctl/ssh/testing/fake_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "sparkctl/ssh/parallel.h"
#include "sparkctl/ssh/self_copy.h"

namespace spark::ssh::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(FakeTransportTest, LatestMatchingRuleWinsAndUnmatchedFails) {
  FakeTransport fake;
  fake.Reply("*", "uname -r", "6.8.0\n");
  fake.Reply("spark-2", "uname -r", "6.11.0\n");
  fake.Reply("*", "cat /sys/class/net/.*/mtu", "9000\n");
  EXPECT_EQ(fake.Run("spark-1", "uname -r")->stdout_data, "6.8.0\n");
  EXPECT_EQ(fake.Run("spark-2", "uname -r")->stdout_data, "6.11.0\n");
  EXPECT_EQ(fake.Run("spark-1", "cat /sys/class/net/enp1s0f0np0/mtu")->stdout_data, "9000\n");
  Result<CommandResult> none = fake.Run("spark-1", "uname -r; reboot");  // Whole-command match.
  EXPECT_EQ(none.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(none.status().message().find("uname -r; reboot"), std::string::npos);
  EXPECT_EQ(fake.CommandsOn("spark-2"), std::vector<std::string>{"uname -r"});
}

TEST(FakeTransportTest, UnknownAndDownNodesFail) {
  FakeTransport fake({"spark-1", "spark-2"});
  fake.Reply("*", "true", "");
  EXPECT_EQ(fake.Run("spark-3", "true").status().code(), StatusCode::kNotFound);
  fake.SetNodeDown("spark-2", UnavailableError("spark-2: unreachable"));
  EXPECT_EQ(fake.Run("spark-2", "true").status().code(), StatusCode::kUnavailable);
  fake.SetNodeDown("spark-2", Status::Ok());
  EXPECT_TRUE(fake.Run("spark-2", "true").ok());
}

TEST(FakeTransportTest, FilesRoundTrip) {
  FakeTransport fake;
  ASSERT_TRUE(fake.WriteFile("spark-1", "/etc/x", std::string("a\0b", 3), 0600).ok());
  EXPECT_EQ(*fake.ReadFile("spark-1", "/etc/x"), std::string("a\0b", 3));
  EXPECT_EQ(fake.GetFileMode("spark-1", "/etc/x"), 0600);
  EXPECT_EQ(fake.ReadFile("spark-2", "/etc/x").status().code(), StatusCode::kNotFound);
}

TEST(RunAllTest, ResultsInInputOrderWithPerNodeErrors) {
  FakeTransport fake({"a", "b", "c"});
  fake.OnCommand("*", "hostname", [](const std::string& node, const std::string&) {
    CommandResult r;
    r.exit_code = 0;
    r.stdout_data = node;
    return Result<CommandResult>(r);
  });
  fake.SetNodeDown("b", UnavailableError("b: unreachable"));
  std::vector<NodeRun> runs = RunAll(fake, {"a", "b", "c"}, "hostname");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].node, "a");
  EXPECT_EQ(runs[0].result->stdout_data, "a");
  EXPECT_EQ(runs[1].result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(runs[2].result->stdout_data, "c");
}

TEST(RunAllTest, SlowNodeDoesNotHoldUpTheOthers) {
  FakeTransport fake;
  fake.OnCommand("*", "work", [](const std::string&, const std::string&) {
    std::this_thread::sleep_for(milliseconds(300));
    CommandResult r;
    r.exit_code = 0;
    return Result<CommandResult>(r);
  });
  std::vector<std::string> nodes = {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"};
  auto start = steady_clock::now();
  std::vector<NodeRun> runs = RunAll(fake, nodes, "work");
  auto elapsed = steady_clock::now() - start;
  for (const NodeRun& run : runs) EXPECT_TRUE(run.result.ok()) << run.node;
  EXPECT_LT(elapsed, milliseconds(1200)) << "8 x 300 ms must run in parallel";
}

TEST(JoinNodeErrorsTest, ListsEveryFailingNode) {
  std::vector<Result<int>> results = {1, UnavailableError("a: down"), NotFoundError("b: gone")};
  Status joined = JoinNodeErrors(results);
  EXPECT_EQ(joined.code(), StatusCode::kUnavailable);
  EXPECT_EQ(joined.message(), "a: down\nb: gone");
  EXPECT_TRUE(JoinNodeErrors(std::vector<Result<int>>{1, 2}).ok());
}

// Emulates `sha256sum` and `mkdir -p` on the fake's in-memory files.
void InstallShellEmulation(FakeTransport& fake, const std::string& local_path) {
  fake.OnCommand("*", "mkdir -p .*", CommandResult{.exit_code = 0});
  fake.OnCommand(
      "*", "if \\[ -e .*", [&fake, local_path](const std::string& node, const std::string&) {
        CommandResult r{.exit_code = 0};
        std::optional<std::string> remote = fake.GetFile(node, "/opt/sparkctl/bin/sparkctl");
        if (remote) {
          std::string tmp = local_path + ".remote";
          std::ofstream(tmp, std::ios::binary) << *remote;
          r.stdout_data = *Sha256File(tmp) + "  /opt/sparkctl/bin/sparkctl\n";
        }
        return Result<CommandResult>(r);
      });
}

TEST(EnsureFileOnNodeTest, UploadsWhenMissingOrDifferentAndSkipsWhenSame) {
  const std::string local = ::testing::TempDir() + "/ensure_local";
  std::ofstream(local, std::ios::binary) << "binary v1";
  FakeTransport fake;
  InstallShellEmulation(fake, local);
  const std::string remote = "/opt/sparkctl/bin/sparkctl";

  Result<RemoteFile> first = EnsureFileOnNode(fake, "spark-1", local, remote);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->uploaded);
  EXPECT_EQ(fake.GetFile("spark-1", remote), "binary v1");
  EXPECT_EQ(fake.GetFileMode("spark-1", remote), 0755);

  fake.ClearCalls();
  Result<RemoteFile> second = EnsureFileOnNode(fake, "spark-1", local, remote);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->uploaded);
  EXPECT_EQ(fake.CommandsOn("spark-1").size(), 1u) << "only the checksum command";

  fake.SetFile("spark-1", remote, "another build");
  Result<RemoteFile> third = EnsureFileOnNode(fake, "spark-1", local, remote);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->uploaded);
  EXPECT_EQ(fake.GetFile("spark-1", remote), "binary v1");
}

TEST(EnsureFileOnNodeTest, UnreachableNodeErrorPassesThrough) {
  FakeTransport fake;
  fake.SetNodeDown("spark-4", UnavailableError("spark-4: unreachable: refused"));
  Result<RemoteFile> result = EnsureFileOnNode(fake, "spark-4", "/proc/self/exe", "/tmp/x");
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("spark-4"), std::string::npos);
}

}  // namespace
}  // namespace spark::ssh::testing
