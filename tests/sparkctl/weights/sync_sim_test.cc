// `weights verify -p` and `weights sync` against a simulated 4-node ring, through the real
// binary, real sshd and real TCP between the node namespaces. Only rank 0 starts with the files
// (rank 2 with a corrupt copy of one); sync must bring every rank to a verified copy.
// model.path lies under /run, which is a private tmpfs in every simulated node, so each node
// really keeps its own copy. With the fabric applied, sync goes over the fabric addresses (the
// management LAN's sync port is closed to prove it), and a server or a stream without the
// sync's key is refused. Needs root; skipped otherwise.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
const std::string kSim = "wsync4";
const std::string kModel = "/run/wsync4-model";

using spark::testing::Output;

std::string last_stderr;  // of the last Sh

Output Sh(const std::string& command) {
  Output o = spark::testing::Shell(command);
  last_stderr = o.err;
  return o;
}

std::string LastStderr() { return last_stderr; }

nlohmann::json Json(const Output& o) {
  try {
    return nlohmann::json::parse(o.out);
  } catch (const nlohmann::json::exception&) {
    ADD_FAILURE() << "not JSON: " << o.out.substr(0, 400) << "\nstderr: " << LastStderr();
    return nlohmann::json::object();
  }
}

class SyncSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it (a test binary without it is broken, not skipped)";
    if (Sh("command -v ip && test -x /usr/sbin/sshd").exit_code != 0) {
      GTEST_SKIP() << "the simulator needs iproute2 and OpenSSH's sshd";
    }
    Sh(kSparkctl + " sim destroy --name " + kSim);
    Output created = Sh(kSparkctl + " sim create --name " + kSim + " --nodes 4 --topology ring");
    ASSERT_EQ(created.exit_code, 0) << LastStderr();
    created_ = true;
    work_ = "/var/tmp/wsync4-test";
    std::filesystem::remove_all(work_);
    std::filesystem::create_directories(work_ + "/src/sub");
    ASSERT_EQ(Sh("head -c 3145728 /dev/urandom > " + work_ + "/src/a.bin && head -c 1000000 "
                 "/dev/urandom > " + work_ + "/src/sub/b.bin && echo '{}' > " + work_ +
                 "/src/config.json").exit_code, 0);
    ASSERT_EQ(Sh(kSparkctl + " weights manifest " + work_ + "/src --repo test/wsync --revision "
                 "0123abc --out " + work_ + "/manifest.json --no-progress").exit_code, 0)
        << LastStderr();
    WriteProfile();
    if (HasFatalFailure()) return;
    // Rank 0 gets the good files; rank 2 a corrupt a.bin of the right size.
    ASSERT_EQ(Exec(0, "mkdir -p " + kModel + " && cp -r " + work_ + "/src/. " + kModel).exit_code, 0);
    ASSERT_EQ(Exec(2, "mkdir -p " + kModel + " && head -c 3145728 /dev/zero > " + kModel +
                      "/a.bin").exit_code, 0);
  }
  void TearDown() override {
    if (created_) Sh(kSparkctl + " sim destroy --name " + kSim);
    if (!work_.empty()) std::filesystem::remove_all(work_);
  }

  // The demo profile with model.path and model.manifest pointed at this test's files.
  void WriteProfile() {
    std::ifstream in(SPARK_SOURCE_DIR "/profiles/qwen3-tiny-demo.yaml");
    std::string text(std::istreambuf_iterator<char>(in), {});
    const std::string path_line = "  path: /var/lib/sparkctl/models/sparkctl--qwen3-tiny-demo\n";
    size_t at = text.find(path_line);
    ASSERT_NE(at, std::string::npos) << "the demo profile changed; update this test";
    text.replace(at, path_line.size(),
                 "  path: " + kModel + "\n  manifest: " + work_ + "/manifest.json\n");
    std::ofstream(work_ + "/profile.yaml") << text;
  }
  Output Exec(int rank, const std::string& cmd) {
    return Sh(kSparkctl + " sim exec --name " + kSim + " " + std::to_string(rank) +
              " -- sh -c '" + cmd + "'");
  }
  std::string Args() {
    return " -p " + work_ + "/profile.yaml -c /run/sparkctl-sim/" + kSim +
           "/cluster.yaml --remote-sparkctl " + kSparkctl;
  }

  bool created_ = false;
  std::string work_;
};

TEST_F(SyncSimTest, OnlyRankZeroHasTheFilesAndSyncFixesEveryRank) {
  Output before = Sh(kSparkctl + " weights verify --json" + Args());
  EXPECT_EQ(before.exit_code, 2);
  nlohmann::json b = Json(before);
  EXPECT_EQ(b["schema"], "sparkctl-weights-cluster-verify/v1");
  ASSERT_EQ(b["nodes"].size(), 4u) << before.out;
  EXPECT_EQ(b["nodes"][0]["ok"], true) << b["nodes"][0].dump();
  EXPECT_NE(b["nodes"][1]["error"].get<std::string>().find("spark-1: cannot verify"),
            std::string::npos) << b["nodes"][1].dump();
  EXPECT_EQ(b["nodes"][2]["report"]["counts"]["hash_mismatch"], 1) << b["nodes"][2].dump();

  Output sync = Sh(kSparkctl + " weights sync --json" + Args());
  nlohmann::json s = Json(sync);
  EXPECT_EQ(sync.exit_code, 0) << sync.out << LastStderr();
  // 3 files to ranks 1 and 3, 2 to rank 2 (its corrupt a.bin plus the two missing ones).
  EXPECT_EQ(s["transfers"].size(), 9u) << sync.out;
  EXPECT_EQ(s["transfers"][0]["from"], "spark-0");
  EXPECT_EQ(s["transfers"][0]["to"], "spark-1");
  EXPECT_EQ(s["errors"].size(), 0u) << sync.out;
  // Not discovered, so no fabric plan: the management LAN, and a warning that says so.
  EXPECT_NE(s["warnings"].dump().find("weights go over the management LAN"), std::string::npos)
      << sync.out;
  EXPECT_EQ(s["transfers"][0]["via"], "198.19.0.10:51893") << sync.out;

  Output after = Sh(kSparkctl + " weights verify --json" + Args());
  EXPECT_EQ(after.exit_code, 0) << after.out;
  EXPECT_EQ(Json(after)["counts"]["ok"], 4);
  std::string want = Sh("sha256sum < " + work_ + "/src/a.bin").out;
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(Exec(r, "sha256sum < " + kModel + "/a.bin").out, want) << "rank " << r;
    EXPECT_EQ(Exec(r, "ls -A " + kModel + " | grep -c partial").out, "0\n") << "rank " << r;
  }

  Output again = Sh(kSparkctl + " weights sync --json" + Args());
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(Json(again)["transfers"].size(), 0u) << "nothing left to copy";
}

TEST_F(SyncSimTest, WithTheFabricUpSyncGoesOverTheFabricAndNeedsTheKey) {
  const std::string seed = "/run/sparkctl-sim/" + kSim + "/cluster.yaml";
  ASSERT_EQ(Sh(kSparkctl + " discover -c " + seed).exit_code, 0) << LastStderr();
  ASSERT_EQ(Sh(kSparkctl + " net apply -c " + seed + " --yes").exit_code, 0) << LastStderr();
  // Only the fabric can carry the sync now: its port is closed on the management LAN.
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(Exec(r, "iptables -I INPUT -i enP7s7 -p tcp --dport 51893 -j DROP").exit_code, 0);
  }
  Output sync = Sh(kSparkctl + " weights sync --json" + Args());
  nlohmann::json s = Json(sync);
  EXPECT_EQ(sync.exit_code, 0) << sync.out << LastStderr();
  EXPECT_EQ(s["warnings"].size(), 0u) << sync.out;
  ASSERT_EQ(s["transfers"].size(), 9u) << sync.out;
  // spark-0 serves spark-1 over cable 0 (spark-0 p0 twin a: 198.18.0.1), and so on round.
  EXPECT_EQ(s["transfers"][0]["via"], "198.18.0.1:51893") << sync.out;
  for (const auto& t : s["transfers"]) {
    EXPECT_EQ(t["via"].get<std::string>().rfind("198.18.", 0), 0u) << t.dump();
  }
  EXPECT_EQ(Sh(kSparkctl + " weights verify --json" + Args()).exit_code, 0);

  // A server of this test with its own key on rank 0's fabric address.
  const std::string key = std::string(64, 'a'), other = std::string(64, 'b');
  ASSERT_EQ(Exec(0, "echo " + key + " | setsid " + kSparkctl + " weights serve --dir " + kModel +
                    " --port 51999 --idle-exit 60 --key-file - >/dev/null 2>&1 &").exit_code, 0);
  const std::string from = " --from 198.18.0.1:51999";
  Output wrong = Exec(1, "echo " + other + " | " + kSparkctl + " weights pull-file" + from +
                         " --key-file - --file a.bin --dir /run/wsync4-other --sha256 " +
                         std::string(64, '0') + " --size 1 --connect-timeout-ms 5000");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(LastStderr().find("did not prove it holds this sync's key"), std::string::npos)
      << LastStderr();
  EXPECT_EQ(Exec(1, "ls /run/wsync4-other 2>/dev/null | wc -l").out, "0\n") << "nothing written";
  // Raw streams without the key: the old request, and a request with a made-up MAC.
  const std::string tcp = "exec 3<>/dev/tcp/198.18.0.1/51999; ";
  Output old = Exec(1, "bash -c \"" + tcp + "echo SPARKCTL-SYNC/1 GET x 0 a.bin >&3; cat <&3\"");
  EXPECT_EQ(old.out.rfind("ERR bad request", 0), 0u) << old.out;
  Output forged = Exec(1, "bash -c \"" + tcp + "echo SPARKCTL-SYNC/2 HELLO " +
                          std::string(32, 'c') + " >&3; read -r c <&3; echo \\$c; echo " +
                          std::string(64, '0') + " GET 0 a.bin >&3; cat <&3\"");
  EXPECT_EQ(forged.out.rfind("CHALLENGE ", 0), 0u) << forged.out;
  EXPECT_NE(forged.out.find("ERR not authenticated"), std::string::npos) << forged.out;
  EXPECT_EQ(forged.out.find("OK "), std::string::npos) << forged.out;
  EXPECT_EQ(Exec(0, "echo " + key + " | " + kSparkctl +
                    " weights pull-file --quit --from 127.0.0.1:51999 --key-file -").exit_code, 0)
      << LastStderr();
}

}  // namespace
