// The whole of SyncNodes — verify, plan, disk check, servers, pipelined fetches, final verify —
// with the real sparkctl binary as the node side, on one machine: a LocalTransport runs each
// "node"'s commands in a local shell, giving node i its own copy of the model directory and its
// own loopback address 127.0.0.(i+1) (so four servers share one port, as on four machines).
#include <filesystem>

#include <gtest/gtest.h>

#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/sha256.h"
#include "sparkctl/weights/sync.h"
#include "tests/sparkctl/weights/local_transport.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using namespace testing;  // NOLINT: test helpers

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
class SyncLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it (a test binary without it is broken, not skipped)";
    files_ = {{"a.bin", RandomBytes(3 << 20, 11)},
              {"sub/b.bin", RandomBytes(1 << 20, 12)},
              {"config.json", "{}\n"}};
    for (const auto& [path, data] : files_) {
      manifest_.files.push_back({path, data.size(), Sha256Hex(data)});
      WriteBytes(transport_.NodeDir("spark-0") + "/" + path, data);
    }
    manifest_.repository = "test/wsync";
    manifest_.revision = "0123abc";
    for (const auto& n : nodes_) addresses_[n] = transport_.Address(n);
  }
  Result<SyncReport> Sync() {
    SyncOptions o{.sparkctl_path = kSparkctl, .port = 51000 + (::getpid() % 10000),
                  .connect_timeout = std::chrono::seconds(10)};
    o.on_event = [this](const std::string& line) { events_.push_back(line); };
    return SyncNodes(transport_, nodes_, addresses_, "m.json", FormatManifestJson(manifest_),
                     kDir, o);
  }

  ScratchDir root_;
  std::vector<std::string> nodes_{"spark-0", "spark-1", "spark-2", "spark-3"};
  LocalTransport transport_{root_.path(), nodes_};
  std::map<std::string, std::string> addresses_;
  std::vector<std::pair<std::string, std::string>> files_;
  Manifest manifest_;
  std::vector<std::string> events_;
};

TEST_F(SyncLocalTest, OnlyRankZeroHasTheFilesAndEveryRankEndsVerified) {
  // Rank 2 holds a corrupt a.bin (right size) and an unrelated extra file, which sync keeps.
  WriteBytes(transport_.NodeDir("spark-2") + "/a.bin", std::string(3 << 20, '\0'));
  WriteBytes(transport_.NodeDir("spark-2") + "/notes.txt", "mine");
  Result<SyncReport> r = Sync();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << (r->errors.empty() ? "" : r->errors[0]);
  EXPECT_EQ(r->plan.transfers.size(), 9u);
  EXPECT_EQ(r->bytes_moved, 3 * ((3u << 20) + (1u << 20) + 3));
  ASSERT_EQ(r->after.nodes.size(), 4u);
  for (const auto& n : nodes_) {
    for (const auto& [path, data] : files_) {
      EXPECT_EQ(Sha256sumOf(transport_.NodeDir(n) + "/" + path), Sha256Hex(data)) << n << path;
    }
    EXPECT_FALSE(std::filesystem::exists(PartialPath(transport_.NodeDir(n), "a.bin")));
  }
  EXPECT_EQ(ReadBytes(transport_.NodeDir("spark-2") + "/notes.txt"), "mine");
  // Ring order: spark-3 fetched from spark-2; only spark-1 fetched from spark-0.
  bool three_from_two = false;
  for (const auto& c : transport_.commands()) {
    if (c.rfind("spark-3: ", 0) == 0 && c.find("weights pull-file --json --from '127.0.0.3:") !=
                                            std::string::npos) {
      three_from_two = true;
    }
    if (c.rfind("spark-1: ", 0) == 0) continue;  // spark-0's successor is the only one it feeds
    EXPECT_EQ(c.find("fetch --json --from '127.0.0.1:"), std::string::npos) << c;
  }
  EXPECT_TRUE(three_from_two);

  Result<SyncReport> again = Sync();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->plan.transfers.empty());
}

TEST_F(SyncLocalTest, CorruptSourceFailsItsChainAndNamesNodeAndFile) {
  // spark-0's b.bin is corrupt and nobody else has one: nothing to copy from.
  WriteBytes(transport_.NodeDir("spark-0") + "/sub/b.bin", RandomBytes(1 << 20, 99));
  Result<SyncReport> r = Sync();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("sub/b.bin"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(transport_.NodeDir("spark-1") + "/a.bin"))
      << "nothing moves when the plan cannot complete";
}

}  // namespace
}  // namespace spark::weights
