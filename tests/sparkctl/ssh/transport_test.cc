// Unit tests of the pieces that need no sshd: helpers, NodeSpec, known_hosts parsing.
#include "sparkctl/ssh/transport.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sparkctl/ssh/known_hosts.h"
#include "sparkctl/ssh/node.h"
#include "sparkctl/ssh/self_copy.h"
#include "sparkctl/ssh/testing/fake_transport.h"

namespace spark::ssh {
namespace {

TEST(ShellQuoteTest, QuotesEverythingIncludingSingleQuotes) {
  EXPECT_EQ(ShellQuote("abc"), "'abc'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's $HOME"), "'it'\\''s $HOME'");
}

TEST(TailTest, KeepsShortTextAndCutsLongTextAtALine) {
  EXPECT_EQ(Tail("short"), "short");
  std::string text = std::string(100, 'a') + "\nline two\nlast line";
  std::string tail = Tail(text, 20);
  EXPECT_EQ(tail, "...line two\nlast line");
}

TEST(NodeSpecTest, ValidateNamesNodeAndField) {
  NodeSpec spec{.name = "spark-1", .address = "198.18.0.1"};
  EXPECT_TRUE(spec.Validate().ok());
  EXPECT_EQ(spec.Target(), "198.18.0.1:22");
  spec.user = "root";
  EXPECT_EQ(spec.Target(), "root@198.18.0.1:22");
  spec.port = 70000;
  Status status = spec.Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("spark-1"), std::string::npos);
  EXPECT_NE(status.message().find("70000"), std::string::npos);
  EXPECT_FALSE(NodeSpec{.name = "x"}.Validate().ok());
  EXPECT_FALSE(NodeSpec{.address = "198.18.0.1"}.Validate().ok());
}

TEST(NodeSpecTest, ParsesHostKeyPolicy) {
  EXPECT_EQ(*ParseHostKeyPolicy("strict"), HostKeyPolicy::kStrict);
  EXPECT_EQ(*ParseHostKeyPolicy("accept_new"), HostKeyPolicy::kAcceptNew);
  EXPECT_EQ(ParseHostKeyPolicy("yes").status().code(), StatusCode::kInvalidArgument);
}

TEST(KnownHostsTest, NameUsesBracketsForOtherPorts) {
  EXPECT_EQ(KnownHostsName("198.18.0.1", 22), "198.18.0.1");
  EXPECT_EQ(KnownHostsName("198.18.0.1", 2222), "[198.18.0.1]:2222");
}

TEST(KnownHostsTest, FieldMatchesPlainListsAndHashedNames) {
  EXPECT_TRUE(KnownHostsFieldMatches("spark-1,198.18.0.1", "198.18.0.1"));
  EXPECT_FALSE(KnownHostsFieldMatches("spark-1,198.18.0.10", "198.18.0.1"));
  // Written by `ssh-keygen -H` for [198.18.0.7]:2222.
  const char* hashed = "|1|/8cSzzb4euEqsw1jO5HxOEVtTR8=|d5Yp2KWRcLqjpr1rFCSpFSoBnPw=";
  EXPECT_TRUE(KnownHostsFieldMatches(hashed, "[198.18.0.7]:2222"));
  EXPECT_FALSE(KnownHostsFieldMatches(hashed, "[198.18.0.7]:2223"));
  EXPECT_FALSE(KnownHostsFieldMatches(hashed, "198.18.0.7"));
}

TEST(KnownHostsTest, FindsLineNumbersAndSkipsCommentsAndMarkers) {
  std::string path = ::testing::TempDir() + "/known_hosts_find";
  std::ofstream(path) << "# comment\n"
                         "198.18.0.2 ssh-ed25519 AAAA\n"
                         "@revoked [198.18.0.1]:2222 ssh-rsa AAAA\n"
                         "\n"
                         "spark-1,[198.18.0.1]:2222 ecdsa-sha2-nistp256 AAAA\n";
  Result<std::vector<KnownHostsLine>> lines = FindKnownHostsLines(path, "[198.18.0.1]:2222");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].number, 5);
  EXPECT_EQ((*lines)[0].key_type, "ecdsa-sha2-nistp256");
  EXPECT_TRUE(FindKnownHostsLines(path + ".missing", "x")->empty());
  EXPECT_EQ(RemoveKnownHostCommand("[198.18.0.1]:2222", "/k h"),
            "ssh-keygen -R '[198.18.0.1]:2222' -f '/k h'");
}

TEST(RunCheckedTest, FailedCommandNamesNodeExitCodeAndStderrTail) {
  testing::FakeTransport fake;
  CommandResult failed;
  failed.exit_code = 3;
  failed.stderr_data = "lots of noise\nmodprobe: FATAL: module mlx5_core not found\n";
  fake.OnCommand("spark-2", "modprobe .*", failed);
  Result<CommandResult> result = RunChecked(fake, "spark-2", "modprobe mlx5_core");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kAborted);
  EXPECT_EQ(result.status().message(),
            "spark-2: `modprobe mlx5_core` exited with status 3: lots of noise\n"
            "modprobe: FATAL: module mlx5_core not found");
}

TEST(Sha256FileTest, MatchesKnownDigest) {
  std::string path = ::testing::TempDir() + "/sha_abc";
  std::ofstream(path) << "abc";
  EXPECT_EQ(*Sha256File(path), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256File(path + ".missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace spark::ssh
