// `sparkctl weights fetch` on a simulated pair, through the real binary and real sshd: the fake
// hub (fake_hf_hub.py) listens on the host's address on the simulator's management bridge,
// spark-0 has the real `hf` CLI (linked into its private /usr/local/bin), spark-1 has none.
// fetch downloads onto spark-0 (rank 0), writes the manifest beside the profile and syncs
// spark-1 over TCP between the node namespaces; `weights verify -p` then passes on both nodes.
// Errors: spark-1 has no `hf` (the install command), a gated repository without a token.
// model.path lies under /run, private to each simulated node. Needs root; skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
const std::string kFakeHub = SPARK_SOURCE_DIR "/tests/sparkctl/weights/fake_hf_hub.py";
const std::string kSim = "hubfetch2";
const std::string kModel = "/run/hubfetch2-model";
const std::string kCommit = "5e1a7c0ffee5e1a7c0ffee5e1a7c0ffee5e1a7c0";
const std::string kWork = "/var/tmp/hubfetch2-test";

using spark::testing::Output;
using spark::testing::Shell;

void Replace(std::string* text, const std::string& from, const std::string& to) {
  size_t at = text->find(from);
  ASSERT_NE(at, std::string::npos) << "the demo profile changed; update this test: " << from;
  text->replace(at, from.size(), to);
}

class HubFetchSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it";
    if (Shell("command -v ip && test -x /usr/sbin/sshd").exit_code != 0) {
      GTEST_SKIP() << "the simulator needs iproute2 and OpenSSH's sshd";
    }
    Output scripts = Shell(
        "python3 -c 'import huggingface_hub, sysconfig; "
        "print(sysconfig.get_path(\"scripts\"))'");
    std::string dir = scripts.out.substr(0, scripts.out.find('\n'));
    if (scripts.exit_code != 0 || access((dir + "/hf").c_str(), X_OK) != 0) {
      GTEST_SKIP() << "huggingface_hub (the `hf` CLI) is not installed for python3: run "
                      "scripts/install-test-python.sh";
    }
    hf_ = dir + "/hf";
    Shell(kSparkctl + " sim destroy --name " + kSim);
    Output created = Shell(kSparkctl + " sim create --name " + kSim + " --nodes 2 --topology pair");
    ASSERT_EQ(created.exit_code, 0) << created.err;
    created_ = true;
    std::filesystem::remove_all(kWork);
    std::filesystem::create_directories(kWork + "/src/sub");
    std::filesystem::create_directories(kWork + "/gated");
    ASSERT_EQ(Shell("head -c 5000000 /dev/urandom > " + kWork +
                    "/src/model.safetensors && "
                    "head -c 300000 /dev/urandom > " +
                    kWork +
                    "/src/sub/extra.bin && echo "
                    "'{}' > " +
                    kWork + "/src/config.json && echo '{}' > " + kWork + "/gated/config.json")
                  .exit_code,
              0);
    WriteProfile();
    if (HasFatalFailure()) return;
    StartHub();
    if (HasFatalFailure()) return;
    // spark-0 gets hf in its own /usr/local/bin (a copy: the host's hf may live in the host's
    // /usr/local/bin, which the node does not see). spark-1 must not find one: a tmpfs hides
    // any folder of the host's that holds one (e.g. pyenv's, put on SSH's PATH by .bashrc).
    std::filesystem::create_directories(kWork + "/bin");
    std::filesystem::copy_file(hf_, kWork + "/bin/hf");
    ASSERT_EQ(Exec(0, "ln -s " + kWork + "/bin/hf /usr/local/bin/hf && hf version").exit_code, 0)
        << last_.err;
    ASSERT_EQ(Exec(1, "for d in " + dir +
                          " /root/.pyenv/shims; do if [ -e $d/hf ]; then "
                          "mount -t tmpfs none $d || exit 1; fi; done")
                  .exit_code,
              0)
        << last_.err;
  }
  void TearDown() override {
    if (hub_pid_ > 0) Shell("kill " + std::to_string(hub_pid_));
    if (created_) Shell(kSparkctl + " sim destroy --name " + kSim);
    std::filesystem::remove_all(kWork);
  }

  // The hub listens on the host's end of the management bridge (198.19.<slot>.1).
  void StartHub() {
    std::ifstream in(Seed());
    std::string yaml(std::istreambuf_iterator<char>(in), {});
    std::smatch m;
    ASSERT_TRUE(std::regex_search(yaml, m, std::regex(R"((198\.19\.\d+)\.10)"))) << yaml;
    const std::string host = m[1].str() + ".1";
    const std::string ready = kWork + "/hub.ready";
    Output o =
        Shell("python3 " + kFakeHub + " --bind " + host + " --repo sparkctl-test/tiny=" + kWork +
              "/src@" + kCommit + " --repo sparkctl-test/gated=" + kWork + "/gated@" + kCommit +
              ",gated --log " + kWork + "/hub.log --ready-file " + ready + " >/dev/null 2>" +
              kWork + "/hub.err & echo $!");
    hub_pid_ = std::atoi(o.out.c_str());
    for (int i = 0; i < 100 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    int port = 0;
    std::ifstream(ready) >> port;
    ASSERT_GT(port, 0) << "the fake hub did not start";
    endpoint_ = "http://" + host + ":" + std::to_string(port);
  }

  void WriteProfile() {
    std::ifstream in(SPARK_SOURCE_DIR "/profiles/qwen3-tiny-demo.yaml");
    std::string text(std::istreambuf_iterator<char>(in), {});
    Replace(&text, "  repository: sparkctl/qwen3-tiny-demo\n",
            "  repository: sparkctl-test/tiny\n");
    Replace(&text, "  revision: 0000000000000000000000000000000000000001\n",
            "  revision: " + kCommit + "\n");
    Replace(&text, "  path: /var/lib/sparkctl/models/sparkctl--qwen3-tiny-demo\n",
            "  path: " + kModel + "\n");
    Replace(&text, "  kind: ring\n  nodes: 4\n", "  kind: pair\n  nodes: 2\n");
    Replace(&text, "  tp: 4\n", "  tp: 2\n");
    std::filesystem::create_directories(kWork + "/profiles");
    std::ofstream(kWork + "/profiles/tiny.yaml") << text;
  }

  std::string Seed() const { return "/run/sparkctl-sim/" + kSim + "/cluster.yaml"; }
  Output Exec(int rank, const std::string& cmd) {
    last_ = Shell(kSparkctl + " sim exec --name " + kSim + " " + std::to_string(rank) +
                  " -- sh -c '" + cmd + "'");
    return last_;
  }
  // sparkctl with the hub's address and hf kept away from anything but the fake hub.
  Output Sparkctl(const std::string& args, const std::string& env = "") {
    last_ = Shell("HF_ENDPOINT=" + endpoint_ +
                  " HF_HUB_DISABLE_TELEMETRY=1 "
                  "HF_HUB_DISABLE_UPDATE_CHECK=1 " +
                  env + " " + kSparkctl + " " + args + " -p " + kWork + "/profiles/tiny.yaml -c " +
                  Seed() + " --remote-sparkctl " + kSparkctl);
    return last_;
  }

  bool created_ = false;
  int hub_pid_ = 0;
  std::string hf_, endpoint_;
  Output last_;
};

TEST_F(HubFetchSimTest, DownloadsOnRankZeroSyncsTheOtherAndBothVerify) {
  Output fetch = Sparkctl("weights fetch --json --poll-interval 0.3");
  ASSERT_EQ(fetch.exit_code, 0) << fetch.out << fetch.err;
  nlohmann::json j = nlohmann::json::parse(fetch.out);
  EXPECT_EQ(j["schema"], "sparkctl-weights-fetch/v1");
  EXPECT_EQ(j["commit"], kCommit);
  ASSERT_EQ(j["downloads"].size(), 1u);
  EXPECT_EQ(j["downloads"][0]["node"], "spark-0");
  EXPECT_EQ(j["bytes_total"], 5000000 + 300000 + 3);
  EXPECT_EQ(j["sync"]["transfers"].size(), 3u) << fetch.out;
  for (const auto& t : j["sync"]["transfers"]) EXPECT_EQ(t["to"], "spark-1") << t.dump();
  EXPECT_EQ(j["verify"]["counts"]["ok"], 2) << fetch.out;
  const std::string manifest =
      kWork + "/profiles/checkpoints/sparkctl-test--tiny/" + kCommit + ".json";
  EXPECT_EQ(j["manifest"]["path"], manifest);
  EXPECT_EQ(j["manifest"]["written"], true);
  EXPECT_NE(fetch.err.find("ETA"), std::string::npos) << "progress on stderr: " << fetch.err;

  // The profile now names the manifest: verify -p passes on both nodes, with the hub's bytes.
  std::string profile = kWork + "/profiles/tiny.yaml";
  std::ifstream in(profile);
  std::string text(std::istreambuf_iterator<char>(in), {});
  Replace(&text, "  path: " + kModel + "\n",
          "  path: " + kModel +
              "\n  manifest: " + j["manifest"]["profile_field"].get<std::string>() + "\n");
  std::ofstream(profile) << text;
  Output verify = Shell(kSparkctl + " weights verify --json -p " + profile + " -c " + Seed() +
                        " --remote-sparkctl " + kSparkctl);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  std::string want = Shell("sha256sum < " + kWork + "/src/model.safetensors").out;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(Exec(r, "sha256sum < " + kModel + "/model.safetensors").out, want) << "rank " << r;
  }
  // Only spark-0 talked to the hub: the file list once for the preflight, once for hf download.
  std::ifstream log(kWork + "/hub.log");
  int tree_calls = 0;
  for (std::string line; std::getline(log, line);)
    tree_calls += line.find("/tree/") != std::string::npos;
  EXPECT_EQ(tree_calls, 2);

  // A second fetch checks the manifest in the profile and copies nothing.
  Output again = Sparkctl("weights fetch --json");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  nlohmann::json a = nlohmann::json::parse(again.out);
  EXPECT_EQ(a["manifest"]["written"], false);
  EXPECT_EQ(a["sync"]["transfers"].size(), 0u);
}

TEST_F(HubFetchSimTest, NodeWithoutHfAndGatedRepositoryAreRefusedWithTheFix) {
  Output no_hf = Sparkctl("weights fetch --node spark-1");
  EXPECT_EQ(no_hf.exit_code, 2);
  EXPECT_NE(no_hf.err.find("spark-1: the Hugging Face CLI `hf` is not installed"),
            std::string::npos)
      << no_hf.err;
  EXPECT_NE(no_hf.err.find("pip install --break-system-packages -U huggingface_hub"),
            std::string::npos)
      << no_hf.err;

  std::string profile = kWork + "/profiles/tiny.yaml";
  std::ifstream in(profile);
  std::string text(std::istreambuf_iterator<char>(in), {});
  Replace(&text, "sparkctl-test/tiny", "sparkctl-test/gated");
  std::ofstream(profile) << text;
  Output gated = Sparkctl("weights fetch --json");
  EXPECT_EQ(gated.exit_code, 2);
  nlohmann::json j = nlohmann::json::parse(gated.out);
  EXPECT_EQ(j["ok"], false);
  std::string message = j["error"]["message"];
  EXPECT_NE(message.find("spark-0: sparkctl-test/gated is a gated repository"), std::string::npos)
      << message;
  EXPECT_NE(message.find("HF_TOKEN"), std::string::npos) << message;
  EXPECT_EQ(Exec(0, "ls " + kModel + " | wc -l").out, "0\n") << "nothing downloaded";
}

}  // namespace
