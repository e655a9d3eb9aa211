// `weights fetch` end to end on one machine: the real `hf` CLI (PyPI huggingface_hub) downloads
// from the fake hub (fake_hf_hub.py on 127.0.0.1, reached through HF_ENDPOINT) onto "node"
// spark-0 of a LocalTransport pair, the manifest is made and checked against the hub's sizes and
// LFS SHA-256s, and sync copies the files to spark-1 with the real sparkctl binary. Also: a
// gated repository (with and without a granted token), a revision the hub does not have, an
// existing manifest of another revision, a node without `hf`, a connection the hub cuts (hf
// resumes it with a Range request) and an hf killed half way (the next fetch finishes it).
// Skipped when huggingface_hub is not installed (scripts/install-test-python.sh installs it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "sparkctl/weights/hub_fetch.h"
#include "sparkctl/weights/sha256.h"
#include "tests/sparkctl/weights/local_transport.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using namespace testing;  // NOLINT: test helpers

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";
const std::string kFakeHub = SPARK_SOURCE_DIR "/tests/sparkctl/weights/fake_hf_hub.py";
const std::string kCommit = "5e1a7c0ffee5e1a7c0ffee5e1a7c0ffee5e1a7c0";
const std::string kRepo = "sparkctl-test/tiny";

// The folder holding the `hf` script of the python3 that has huggingface_hub, or "".
std::string HfScriptsDir() {
  int rc = 0;
  std::string out = RunShell(
      "python3 -c 'import huggingface_hub, sysconfig; "
      "print(sysconfig.get_path(\"scripts\"))' 2>/dev/null",
      &rc);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (rc != 0 || out.empty() || ::access((out + "/hf").c_str(), X_OK) != 0) return "";
  return out;
}

class FakeHub {
 public:
  // Starts the hub; `extra` are more fake_hf_hub.py arguments. Ports are kept across restarts.
  void Start(const std::string& root, const std::string& extra) {
    std::string ready = root + "/hub.ready";
    std::filesystem::remove(ready);
    std::string ports =
        port_ ? " --port " + std::to_string(port_) + " --cdn-port " + std::to_string(cdn_port_)
              : "";
    std::string cmd = "python3 " + kFakeHub + " --bind 127.0.0.1" + ports + " --log " + root +
                      "/hub.log --ready-file " + ready + " " + extra + " >/dev/null 2>" + root +
                      "/hub.err & echo $!";
    pid_ = std::atoi(RunShell(cmd).c_str());
    for (int i = 0; i < 100 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::ifstream(ready) >> port_ >> cdn_port_;
  }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      RunShell("while kill -0 " + std::to_string(pid_) + " 2>/dev/null; do sleep 0.05; done");
    }
    pid_ = 0;
  }
  ~FakeHub() { Stop(); }
  std::string Endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int pid_ = 0;
  int port_ = 0, cdn_port_ = 0;
};

class HubFetchLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it";
    hf_dir_ = HfScriptsDir();
    if (hf_dir_.empty()) {
      GTEST_SKIP() << "huggingface_hub (the `hf` CLI) is not installed for python3: run "
                      "scripts/install-test-python.sh";
    }
    // hf must never call anything but the fake hub.
    ::setenv("HF_HUB_DISABLE_TELEMETRY", "1", 1);
    ::setenv("HF_HUB_DISABLE_UPDATE_CHECK", "1", 1);
    ::unsetenv("HF_TOKEN");
    for (const auto& n : nodes_) transport_.shell_prefix[n] = "PATH=" + hf_dir_ + ":$PATH; ";
    src_ = root_.path() + "/src";
    files_ = {{"model.safetensors", RandomBytes(3 << 20, 21)},
              {"sub/extra.bin", RandomBytes(200000, 22)},
              {"config.json", "{\"model_type\": \"qwen3\"}\n"}};
    for (const auto& [path, data] : files_) WriteBytes(src_ + "/" + path, data);
    WriteBytes(root_.path() + "/gated/config.json", "{}\n");
    for (size_t i = 0; i < nodes_.size(); ++i) {
      cluster_.nodes.push_back({.name = nodes_[i],
                                .address = transport_.Address(nodes_[i]),
                                .rank = static_cast<int>(i)});
    }
    profile_.source_file = root_.path() + "/profiles/tiny.yaml";
    profile_.model.repository = kRepo;
    profile_.model.revision = kCommit;
    profile_.model.path = kDir;
  }

  std::string Repos() const {
    return "--repo " + kRepo + "=" + src_ + "@" + kCommit +
           " --repo sparkctl-test/gated=" + root_.path() + "/gated@" + kCommit +
           ",gated --grant hf_granted";
  }

  Result<HubFetchReport> Fetch(const std::string& token = "") {
    HubFetchOptions o{.sparkctl_path = kSparkctl,
                      .hub_env = {{"HF_ENDPOINT", hub_.Endpoint()},
                                  {"HF_HUB_DISABLE_TELEMETRY", "1"},
                                  {"HF_HUB_DISABLE_UPDATE_CHECK", "1"}},
                      .poll_interval = std::chrono::milliseconds(200)};
    if (!token.empty()) o.hub_env["HF_TOKEN"] = token;
    o.sync.port = 31000 + (::getpid() % 1700);  // below the ephemeral ports
    o.sync.connect_timeout = std::chrono::seconds(10);
    o.on_progress = [this](uint64_t done, uint64_t total, uint64_t, double) {
      progress_.emplace_back(done, total);
    };
    return FetchFromHub(transport_, cluster_, profile_, o);
  }

  std::vector<nlohmann::json> HubLog() {
    std::vector<nlohmann::json> out;
    std::ifstream in(root_.path() + "/hub.log");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  ScratchDir root_;
  std::vector<std::string> nodes_{"spark-0", "spark-1"};
  LocalTransport transport_{root_.path(), nodes_};
  std::string hf_dir_, src_;
  std::vector<std::pair<std::string, std::string>> files_;
  netplan::ClusterSpec cluster_;
  profile::Profile profile_;
  FakeHub hub_;
  std::vector<std::pair<uint64_t, uint64_t>> progress_;
};

TEST_F(HubFetchLocalTest, DownloadsOnRankZeroWritesTheManifestAndSyncsTheOtherNode) {
  hub_.Start(root_.path(), Repos());
  Result<HubFetchReport> r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << ReadBytes(root_.path() + "/hub.err");
  EXPECT_TRUE(r->ok()) << FormatHubFetchText(*r);
  EXPECT_EQ(r->hub.commit, kCommit);
  ASSERT_EQ(r->downloads.size(), 1u);
  EXPECT_EQ(r->downloads[0].node, "spark-0");
  // Only spark-0 talked to the hub; spark-1 got its copy over sync (3 files).
  EXPECT_EQ(r->sync.plan.transfers.size(), 3u);
  for (const auto& t : r->sync.plan.transfers) EXPECT_EQ(t.to, "spark-1") << t.file;
  for (const auto& n : nodes_) {
    for (const auto& [path, data] : files_) {
      EXPECT_EQ(Sha256sumOf(transport_.NodeDir(n) + "/" + path), Sha256Hex(data)) << n << path;
    }
  }
  // The manifest went beside the profile, for the commit, with every file's real hash.
  EXPECT_TRUE(r->manifest_written);
  EXPECT_EQ(r->manifest_path,
            root_.path() + "/profiles/checkpoints/sparkctl-test--tiny/" + kCommit + ".json");
  EXPECT_EQ(r->manifest_field, "checkpoints/sparkctl-test--tiny/" + kCommit + ".json");
  Result<Manifest> m = ReadManifestFile(r->manifest_path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->repository, kRepo);
  EXPECT_EQ(m->revision, kCommit);
  ASSERT_EQ(m->files.size(), 3u);
  EXPECT_EQ(m->files[1].path, "model.safetensors");
  EXPECT_EQ(m->files[1].sha256, Sha256Hex(files_[0].second));
  // Progress: against the hub's total, ending at it.
  ASSERT_FALSE(progress_.empty());
  EXPECT_EQ(progress_.back().second, (3u << 20) + 200000 + files_[2].second.size());
  EXPECT_EQ(progress_.back().first, progress_.back().second);
  // The LFS files came from the "CDN" port, the small one from the hub itself.
  int cdn_gets = 0;
  for (const auto& e : HubLog()) cdn_gets += e["cdn"] == true && e["method"] == "GET";
  EXPECT_EQ(cdn_gets, 2);

  // A second fetch finds the manifest and checks it; nothing is copied.
  Result<HubFetchReport> again = Fetch();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->ok());
  EXPECT_FALSE(again->manifest_written);
  EXPECT_TRUE(again->sync.plan.transfers.empty());
  nlohmann::json j = nlohmann::json::parse(FormatHubFetchJson(*again));
  EXPECT_EQ(j["schema"], "sparkctl-weights-fetch/v1");
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["verify"]["counts"]["ok"], 2);
}

TEST_F(HubFetchLocalTest, EachNodeDownloadsItselfAndNothingIsSynced) {
  hub_.Start(root_.path(), Repos());
  HubFetchOptions o{.each_node = true,
                    .sparkctl_path = kSparkctl,
                    .hub_env = {{"HF_ENDPOINT", hub_.Endpoint()}},
                    .poll_interval = std::chrono::milliseconds(200)};
  o.sync.port = 31000 + (::getpid() % 1700);
  Result<HubFetchReport> r = FetchFromHub(transport_, cluster_, profile_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << FormatHubFetchText(*r);
  ASSERT_EQ(r->downloads.size(), 2u);
  EXPECT_TRUE(r->sync.plan.transfers.empty());
  int model_gets = 0;
  for (const auto& e : HubLog()) {
    model_gets += e["method"] == "GET" && e["path"] == "/lfs/" + Sha256Hex(files_[0].second);
  }
  EXPECT_EQ(model_gets, 2) << "one download per node";
  for (const auto& n : nodes_) {
    EXPECT_EQ(Sha256sumOf(transport_.NodeDir(n) + "/model.safetensors"),
              Sha256Hex(files_[0].second))
        << n;
  }
  o.node = "spark-1";
  EXPECT_EQ(FetchFromHub(transport_, cluster_, profile_, o).status().code(),
            StatusCode::kInvalidArgument)
      << "--node and --each-node exclude each other";
}

TEST_F(HubFetchLocalTest, GatedRepositoryNeedsAGrantedToken) {
  hub_.Start(root_.path(), Repos());
  profile_.model.repository = "sparkctl-test/gated";
  Result<HubFetchReport> r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  for (const char* want :
       {"spark-0", "sparkctl-test/gated is a gated repository", "HF_TOKEN", "accept its terms"}) {
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << want << ": " << r.status().ToString();
  }
  Result<HubFetchReport> wrong = Fetch("hf_not_granted");  // the hub answers 403
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied) << wrong.status().ToString();
  Result<HubFetchReport> ok = Fetch("hf_granted");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->ok()) << FormatHubFetchText(*ok);
  bool saw_403 = false, saw_401 = false;
  for (const auto& e : HubLog()) {
    saw_401 |= e["status"] == 401;
    saw_403 |= e["status"] == 403;
  }
  EXPECT_TRUE(saw_401 && saw_403);
}

TEST_F(HubFetchLocalTest, RevisionTheHubDoesNotHaveIsNamedWithTheFix) {
  hub_.Start(root_.path(), Repos());
  profile_.model.revision = "0000000000000000000000000000000000000bad";
  Result<HubFetchReport> r = Fetch();
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find("revision 0000000000000000000000000000000000000bad does "
                                      "not exist in sparkctl-test/tiny"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("fix model.revision in " + profile_.source_file),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(transport_.NodeDir("spark-0") + "/config.json"));

  profile_.model.repository = "sparkctl-test/missing";
  profile_.model.revision = kCommit;
  Result<HubFetchReport> missing = Fetch();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("repository sparkctl-test/missing was not found"),
            std::string::npos)
      << missing.status().ToString();
}

TEST_F(HubFetchLocalTest, ManifestOfAnotherRevisionIsRefusedBeforeAnyDownload) {
  hub_.Start(root_.path(), Repos());
  Manifest other{.repository = kRepo, .revision = "1111111111111111111111111111111111111111"};
  for (const auto& [path, data] : files_)
    other.files.push_back({path, data.size(), Sha256Hex(data)});
  profile_.model.manifest = "other.json";
  std::filesystem::create_directories(root_.path() + "/profiles");
  ASSERT_TRUE(
      WriteManifestFile(root_.path() + "/profiles/other.json", other, ManifestFormat::kJson).ok());
  Result<HubFetchReport> r = Fetch();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("revision mismatch: it records revision 1111111"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(transport_.NodeDir("spark-0") + "/config.json"));
}

TEST_F(HubFetchLocalTest, NodeWithoutHfIsRefusedWithTheInstallCommand) {
  hub_.Start(root_.path(), Repos());
  transport_.shell_prefix["spark-1"] = "PATH=/nonexistent; ";
  HubFetchOptions o{
      .node = "spark-1", .sparkctl_path = kSparkctl, .hub_env = {{"HF_ENDPOINT", hub_.Endpoint()}}};
  Result<HubFetchReport> r = FetchFromHub(transport_, cluster_, profile_, o);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("spark-1: the Hugging Face CLI `hf` is not installed"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find(
                "python3 -m pip install --break-system-packages -U huggingface_hub"),
            std::string::npos)
      << r.status().ToString();
  o.node = "spark-9";
  EXPECT_EQ(FetchFromHub(transport_, cluster_, profile_, o).status().code(), StatusCode::kNotFound);
}

// The CDN cuts the model's first transfer after 12 MiB: hf asks again from the 10 MiB it had
// written (it writes in 10 MiB pieces) with a Range request, within the same fetch.
TEST_F(HubFetchLocalTest, DroppedConnectionIsResumedWithARangeRequest) {
  files_[0].second = RandomBytes(24 << 20, 23);
  WriteBytes(src_ + "/model.safetensors", files_[0].second);
  hub_.Start(root_.path(), Repos() + " --drop-after 12582912");
  Result<HubFetchReport> r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << FormatHubFetchText(*r);
  const std::string object = "/lfs/" + Sha256Hex(files_[0].second);
  uint64_t sent = 0;
  bool cut = false, resumed = false;
  std::string log;
  for (const auto& e : HubLog()) {
    log += e.dump() + "\n";
    if (e["method"] != "GET" || e["path"] != object) continue;
    sent += e["sent"].get<uint64_t>();
    cut |= e["cut"] == true;
    resumed |= !e["range_start"].is_null() && e["range_start"].get<uint64_t>() >= (10u << 20);
  }
  EXPECT_TRUE(cut) << log;
  EXPECT_TRUE(resumed) << "no Range request from where the transfer stopped:\n" << log;
  EXPECT_LT(sent, 2 * (24u << 20)) << log;
  for (const auto& n : nodes_) {
    EXPECT_EQ(Sha256sumOf(transport_.NodeDir(n) + "/model.safetensors"),
              Sha256Hex(files_[0].second))
        << n;
  }
}

// hf killed half way (the node rebooted, someone killed it): the fetch fails with the fix; the
// next one keeps the finished files, removes hf's dead partial file and completes.
TEST_F(HubFetchLocalTest, KilledDownloadIsFinishedByTheNextFetch) {
  files_[0].second = RandomBytes(24 << 20, 24);
  WriteBytes(src_ + "/model.safetensors", files_[0].second);
  hub_.Start(root_.path(), Repos() + " --rate 8388608");  // 24 MiB in 3 s
  const std::string dir = transport_.NodeDir("spark-0");
  std::thread killer([&] {
    for (int i = 0; i < 300; ++i) {
      bool small_done = std::filesystem::exists(dir + "/config.json") &&
                        std::filesystem::exists(dir + "/sub/extra.bin");
      std::string big = RunShell("find " + dir +
                                 "/.cache/huggingface/download -name "
                                 "'*.incomplete' -size +9M 2>/dev/null | head -1");
      if (small_done && !big.empty()) {
        RunShell("pkill -KILL -P \"$(cat " + dir + "/.cache/sparkctl/hf.pid)\"");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  Result<HubFetchReport> first = Fetch();
  killer.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->downloads.size(), 1u);
  EXPECT_EQ(first->downloads[0].status.code(), StatusCode::kAborted)
      << first->downloads[0].status.ToString();
  EXPECT_NE(first->downloads[0].status.message().find("run `sparkctl weights fetch` again"),
            std::string::npos)
      << first->downloads[0].status.ToString();
  EXPECT_FALSE(first->ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
  EXPECT_EQ(RunShell("find " + dir + " -name '*.incomplete' | wc -l"), "1\n");

  hub_.Stop();
  size_t before = HubLog().size();
  hub_.Start(root_.path(), Repos());  // full speed, same ports
  Result<HubFetchReport> second = Fetch();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->ok()) << FormatHubFetchText(*second);
  EXPECT_EQ(RunShell("find " + dir + " -name '*.incomplete' | wc -l"), "0\n");
  // Only the unfinished file crossed the network again.
  std::vector<nlohmann::json> log = HubLog();
  std::string gets;
  for (size_t i = before; i < log.size(); ++i) {
    if (log[i]["method"] == "GET" &&
        log[i]["path"].get<std::string>().find("/api/") == std::string::npos) {
      gets += log[i]["path"].get<std::string>() + "\n";
    }
  }
  EXPECT_EQ(gets, "/lfs/" + Sha256Hex(files_[0].second) + "\n");
  for (const auto& n : nodes_) {
    EXPECT_EQ(Sha256sumOf(transport_.NodeDir(n) + "/model.safetensors"),
              Sha256Hex(files_[0].second))
        << n;
  }
}

// scripts/checkpoint-manifest.sh, the documented step for the real profiles' manifests: hf
// download into a folder, then `weights manifest --check-hub`, which writes nothing unless every
// size and LFS SHA-256 is the Hub's.
TEST_F(HubFetchLocalTest, CheckpointManifestScriptWritesWhatTheHubAgreesWith) {
  hub_.Start(root_.path(), Repos());
  std::ifstream in(SPARK_SOURCE_DIR "/profiles/qwen3-tiny-demo.yaml");
  std::string text(std::istreambuf_iterator<char>(in), {});
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"sparkctl/qwen3-tiny-demo\n", kRepo + "\n"},
        {"0000000000000000000000000000000000000001", kCommit}}) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << "the demo profile changed; update this test";
    text.replace(at, from.size(), to);
  }
  const std::string profile = root_.path() + "/profiles/tiny.yaml";
  WriteBytes(profile, text);
  const std::string env =
      "PATH=" + hf_dir_ + ":$PATH HF_ENDPOINT=" + hub_.Endpoint() + " SPARKCTL=" + kSparkctl + " ";
  const std::string script = env + SPARK_SOURCE_DIR "/scripts/checkpoint-manifest.sh " + profile +
                             " " + root_.path() + "/dl";
  int rc = -1;
  std::string out = RunShell(script + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string manifest =
      root_.path() + "/profiles/checkpoints/sparkctl-test--tiny/" + kCommit + ".json";
  Result<Manifest> m = ReadManifestFile(manifest);
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << out;
  EXPECT_EQ(m->revision, kCommit);
  ASSERT_EQ(m->files.size(), 3u);
  EXPECT_EQ(m->files[1].sha256, Sha256Hex(files_[0].second));
  // Run again: the pinned manifest is not replaced.
  RunShell(script + " 2>&1", &rc);
  EXPECT_EQ(rc, 2);

  // A copy that differs from the Hub (same size, other bytes) is refused, nothing written.
  std::string bad = files_[0].second;
  bad[1000] ^= 0x55;
  WriteBytes(root_.path() + "/dl/model.safetensors", bad);
  out = RunShell(env + kSparkctl + " weights manifest " + root_.path() + "/dl --repo " + kRepo +
                     " --revision " + kCommit + " --out " + root_.path() +
                     "/x.json --no-cache "
                     "--no-progress --check-hub 2>&1",
                 &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("model.safetensors: SHA-256 " + Sha256Hex(bad) +
                     " but the Hub's LFS "
                     "SHA-256 is " +
                     Sha256Hex(files_[0].second)),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(root_.path() + "/x.json"));
}

}  // namespace
}  // namespace spark::weights
