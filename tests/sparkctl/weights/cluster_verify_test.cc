// Cluster-wide verify over a FakeTransport: the per-node reports the node-side
// `weights verify --json` prints are merged, and every failure names its node and file.
#include "sparkctl/weights/cluster_verify.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sparkctl/ssh/testing/fake_transport.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/verify_report.h"

namespace spark::weights {
namespace {

using ssh::testing::FakeTransport;

const std::string kA(64, 'a');
const std::string kB(64, 'b');
const std::string kDir = "/models/qwen";

std::string ManifestText() {
  Manifest m{.repository = "Qwen/Qwen3-0.6B", .revision = "c1899de",
             .files = {{"a.bin", 10, kA}, {"b.bin", 20, kB}}};
  return FormatManifestJson(m);
}

// The JSON a node prints; `bad` turns b.bin into `state`.
std::string NodeJson(const std::string& hostname, std::optional<FileState> bad = std::nullopt) {
  VerifyReport r{.node = hostname, .dir = kDir, .manifest = "-",
                 .repository = "Qwen/Qwen3-0.6B", .revision = "c1899de"};
  r.files.push_back({.path = "a.bin", .expected_size = 10, .actual_size = 10,
                     .expected_sha256 = kA, .actual_sha256 = kA});
  FileCheck b{.path = "b.bin", .expected_size = 20, .actual_size = 20, .expected_sha256 = kB,
              .actual_sha256 = kB};
  if (bad) {
    b.state = *bad;
    b.actual_sha256 = std::string(64, 'c');
    b.detail = "SHA-256 differs from the manifest";
  }
  r.files.push_back(b);
  r.bytes_total = 30;
  return FormatVerifyReportJson(r);
}

class ClusterVerifyTest : public ::testing::Test {
 protected:
  ClusterVerifyTest() : fake_({"spark-0", "spark-1", "spark-2"}) {
    for (const auto& n : nodes_) fake_.Reply(n, ".*weights verify.*", NodeJson("host-" + n));
  }
  Result<ClusterVerifyReport> Verify(ClusterVerifyOptions o = {}) {
    o.sparkctl_path = "/opt/sparkctl";
    return VerifyNodes(fake_, nodes_, "profiles/checkpoints/q.json", ManifestText(), kDir, o);
  }
  std::vector<std::string> nodes_{"spark-0", "spark-1", "spark-2"};
  FakeTransport fake_;
};

TEST_F(ClusterVerifyTest, AllNodesOk) {
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok());
  ASSERT_EQ(r->nodes.size(), 3u);
  EXPECT_EQ(r->nodes[1].node, "spark-1");
  EXPECT_EQ(r->nodes[1].report.node, "spark-1") << "inventory name wins over the hostname";
  EXPECT_EQ(r->nodes[1].report.manifest, "profiles/checkpoints/q.json");
  EXPECT_NE(FormatClusterVerifyText(*r).find("OK: Qwen/Qwen3-0.6B@c1899de verified on all 3"),
            std::string::npos);
}

TEST_F(ClusterVerifyTest, RunsNodeSideVerifyWithManifestOnStdin) {
  ASSERT_TRUE(Verify().ok());
  std::vector<std::string> cmds = fake_.CommandsOn("spark-2");
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0], "'/opt/sparkctl' weights verify --manifest - --dir '/models/qwen' --json "
                     "--no-progress");
  ClusterVerifyOptions o{.allow_extra = true, .use_cache = false, .create_dir = true};
  fake_.ClearCalls();
  ASSERT_TRUE(Verify(o).ok());
  EXPECT_EQ(fake_.CommandsOn("spark-0")[0],
            "mkdir -p '/models/qwen' && '/opt/sparkctl' weights verify --manifest - --dir "
            "'/models/qwen' --json --no-progress --allow-extra --no-cache");
}

struct MismatchCase {
  FileState state;
  std::string word;
};

class ClusterVerifyMismatchTest : public ClusterVerifyTest,
                                  public ::testing::WithParamInterface<MismatchCase> {};

TEST_P(ClusterVerifyMismatchTest, NamesNodeFileAndState) {
  fake_.Reply("spark-1", ".*weights verify.*", NodeJson("x", GetParam().state), 2);
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok());
  EXPECT_TRUE(r->nodes[0].ok(false));
  EXPECT_FALSE(r->nodes[1].ok(false));
  std::string text = FormatClusterVerifyText(*r);
  EXPECT_NE(text.find("spark-1: /models/qwen/b.bin: " + GetParam().word), std::string::npos)
      << text;
  EXPECT_NE(text.find("FAILED: 1 of 3 nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("sparkctl weights sync"), std::string::npos) << "the fix is named";
}

INSTANTIATE_TEST_SUITE_P(States, ClusterVerifyMismatchTest,
                         ::testing::Values(MismatchCase{FileState::kMissing, "missing"},
                                           MismatchCase{FileState::kSizeMismatch, "size_mismatch"},
                                           MismatchCase{FileState::kHashMismatch, "hash_mismatch"},
                                           MismatchCase{FileState::kExtra, "extra"}));

TEST_F(ClusterVerifyTest, UnreachableNodeIsNamedAndFailsTheCluster) {
  fake_.SetNodeDown("spark-2", UnavailableError("spark-2: unreachable: 10.0.0.3:22: refused"));
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->Unreachable(), 1u);
  EXPECT_EQ(r->nodes[2].status.message(), "spark-2: unreachable: 10.0.0.3:22: refused");
  auto j = nlohmann::json::parse(FormatClusterVerifyJson(*r));
  EXPECT_EQ(j["schema"], "sparkctl-weights-cluster-verify/v1");
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["counts"]["unreachable"], 1);
  EXPECT_EQ(j["counts"]["ok"], 2);
  EXPECT_TRUE(j["nodes"][2]["report"].is_null());
  EXPECT_NE(j["nodes"][2]["error"].get<std::string>().find("spark-2: unreachable"),
            std::string::npos);
  EXPECT_EQ(j["nodes"][0]["report"]["schema"], "sparkctl-weights-verify/v1");
}

TEST_F(ClusterVerifyTest, NodeWithoutReportGetsItsStderrAndTheFix) {
  ssh::CommandResult failed{.exit_code = 2, .stderr_data = "sparkctl: NotFound: /models/qwen: "
                                                           "no such directory\n"};
  fake_.OnCommand("spark-0", ".*weights verify.*", failed);
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  const Status& s = r->nodes[0].status;
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "spark-0: cannot verify /models/qwen: sparkctl: NotFound: "
                         "/models/qwen: no such directory; fix the directory on spark-0 or run "
                         "`sparkctl weights sync`");
}

// A node's `weights verify --json` that stops early prints its schema's error document; the
// node's error is that message, with the fix.
TEST_F(ClusterVerifyTest, NodeErrorDocumentBecomesTheNodesError) {
  ssh::CommandResult failed{
      .exit_code = 2,
      .stdout_data = R"({"schema": "sparkctl-weights-verify/v1", "ok": false, "error": )"
                     R"({"code": "NotFound", "message": "/models/qwen: no such directory"}})",
      .stderr_data = "sparkctl: /models/qwen: no such directory\n"};
  fake_.OnCommand("spark-0", ".*weights verify.*", failed);
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  const Status& s = r->nodes[0].status;
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "spark-0: cannot verify /models/qwen: /models/qwen: no such directory; "
                         "fix the directory on spark-0 or run `sparkctl weights sync`");
}

TEST_F(ClusterVerifyTest, GarbageOutputNamesNode) {
  fake_.Reply("spark-1", ".*weights verify.*", "not json", 0);
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->nodes[1].status.ok());
  EXPECT_EQ(r->nodes[1].status.message().rfind("spark-1", 0), 0u) << r->nodes[1].status.message();
}

TEST_F(ClusterVerifyTest, OtherExitCodeIsAnError) {
  fake_.Reply("spark-1", ".*weights verify.*", NodeJson("x"), 127);
  Result<ClusterVerifyReport> r = Verify();
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->nodes[1].status.message().find("exited with status 127"), std::string::npos)
      << r->nodes[1].status.message();
}

TEST_F(ClusterVerifyTest, BadManifestFailsBeforeAnyNodeIsContacted) {
  Result<ClusterVerifyReport> r =
      VerifyNodes(fake_, nodes_, "q.json", "{\"schema\": 1", kDir, {.sparkctl_path = "/x"});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("q.json"), std::string::npos);
  EXPECT_TRUE(fake_.calls().empty());
}

TEST_F(ClusterVerifyTest, ReportsEveryNodeAsItFinishes) {
  std::vector<std::string> seen;
  ClusterVerifyOptions o;
  o.on_node_done = [&](const NodeVerify& n, size_t done, size_t total) {
    seen.push_back(FormatNodeDoneLine(n, done, total));
  };
  ASSERT_TRUE(Verify(o).ok());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NE(seen.back().find("(3/3)"), std::string::npos) << seen.back();
  EXPECT_NE(seen.front().find(": ok, 2 files"), std::string::npos) << seen.front();
}

TEST(RingOrderTest, SortsByRankWhenAllNodesHaveOne) {
  netplan::ClusterSpec c;
  c.nodes = {{.name = "b", .rank = 2}, {.name = "a", .rank = 0}, {.name = "c", .rank = 1}};
  EXPECT_EQ(RingOrder(c), (std::vector<std::string>{"a", "c", "b"}));
  c.nodes[0].rank.reset();
  EXPECT_EQ(RingOrder(c), (std::vector<std::string>{"b", "a", "c"}));
}

}  // namespace
}  // namespace spark::weights
