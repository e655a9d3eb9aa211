// Bundles on a simulated cluster whose nodes do not see the host's build libraries
// (`sim create --bare-libs`): what the nodes run must come from the bundle that sparkctl installs,
// and a node that reports another machine or an older glibc is refused before anything is copied
// to it. Real binary, real sshd, real SFTP uploads, the real install scripts.
#include <gnu/libc-version.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sparkctl/bundle/library_resolver.h"
#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kBin = SPARK_BINARY_DIR "/bin";
const std::string kSparkctl = kBin + "/sparkctl";

using spark::testing::Output;

Output Sh(const std::string& command) { return spark::testing::Shell(command, true); }

class BareCluster {
 public:
  explicit BareCluster(std::string name) : name_(std::move(name)) {
    Sh(kSparkctl + " sim destroy --name " + name_);
    created_ = Sh(kSparkctl + " sim create --bare-libs --name " + name_ +
                  " --nodes 2 --topology pair").exit_code == 0;
  }
  ~BareCluster() {
    Sh(kSparkctl + " down -c " + seed() + " --state-root " + state_root());
    Sh(kSparkctl + " sim destroy --name " + name_);
    std::filesystem::remove_all(state_root());
  }
  bool created() const { return created_; }
  std::string seed() const { return "/run/sparkctl-sim/" + name_ + "/cluster.yaml"; }
  std::string state_root() const { return std::string(SPARK_BINARY_DIR) + "/bundle-sim/" + name_; }
  // stdout, then stderr unless `stdout_only`.
  Output Exec(const std::string& node, const std::string& command, bool stdout_only = false) const {
    return spark::testing::Shell(kSparkctl + " sim exec --name " + name_ + " " + node +
                                     " -- sh -c '" + command + "'",
                                 !stdout_only);
  }
  Output Fault(const std::string& args) const {
    return Sh(kSparkctl + " sim fault --name " + name_ + " " + args);
  }
  Output Sparkctl(const std::string& args) const { return Sh(kSparkctl + " " + args); }

 private:
  std::string name_;
  bool created_ = false;
};

class BundleSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    for (const char* p : {"sparkctl", "spark-engine", "spark-bench"}) {
      ASSERT_EQ(access((kBin + "/" + p).c_str(), X_OK), 0) << p << " is missing: build it";
    }
  }
};

nlohmann::json JsonOf(const std::string& text) {
  const size_t start = text.find("{\n");
  auto j = nlohmann::json::parse(start == std::string::npos ? text : text.substr(start), nullptr,
                                 false);
  if (j.is_discarded()) ADD_FAILURE() << "not JSON: " << text.substr(0, 600);
  return j;
}

// `up` with the tiny demo model on the same nodes: spark-engine runs from the bundle.
void UpServesFromTheBundle(const BareCluster& c) {
  const std::string model = std::string(SPARK_BINARY_DIR) + "/bundle-sim/model";
  if (!std::filesystem::exists(model + "/config.json")) {
    ASSERT_EQ(Sh("python3 " SPARK_SOURCE_DIR "/scripts/make_demo_model.py " + model).exit_code, 0);
  }
  const std::string profile = c.state_root() + "/profile.yaml";
  std::filesystem::create_directories(c.state_root());
  std::ofstream(profile)
      << "schema: sparkctl-profile/v1\nname: bundle-sim\nmodel:\n  repository: "
         "sparkctl/qwen3-tiny-demo\n  revision: 0000000000000000000000000000000000000001\n"
         "  path: " << model << "\n  served_name: bundle-sim\ntopology:\n  kind: pair\n"
         "  nodes: 2\nhost:\n  kernel:\n    allow: [6.17.0-1031-nvidia]\n  min_cma_mib: 64\n"
         "  memlock: \"8192\"\n  min_free_memory_gib: 0.5\nengine:\n  backend: cpu\n  tp: 2\n"
         "  context_length: 1024\n  chunked_prefill: 256\n  max_running_requests: 4\n"
         "  kv_cache:\n    dtype: fp32\n    tokens: 4096\napi:\n  port: 8010\n"
         "  bind: 127.0.0.1\n";
  Output up = c.Sparkctl("up -c " + c.seed() + " --state-root " + c.state_root() + " -p " +
                         profile + " --yes --json --timeout 240");
  ASSERT_EQ(up.exit_code, 0) << up.out;
  const nlohmann::json report = JsonOf(up.out);
  bool engine_step = false;
  for (const auto& step : report["steps"]) {
    if (step["name"] != "engine") continue;
    engine_step = true;
    EXPECT_NE(step["detail"].get<std::string>().find("spark-engine of the x86_64 bundle"),
              std::string::npos) << step.dump();
  }
  EXPECT_TRUE(engine_step) << up.out;
  // The ranks run the bundle's engine, mapped from the bundle's libraries.
  Output maps = c.Exec("spark-0", "grep -h libspdlog /proc/$(cat /run/sparkctl/up/*/rank0.pid)/maps "
                                  "| head -n 1");
  EXPECT_NE(maps.out.find("/usr/local/lib/sparkctl/bundles/"), std::string::npos) << maps.out;
  Output down = c.Sparkctl("down -c " + c.seed() + " --state-root " + c.state_root());
  EXPECT_EQ(down.exit_code, 0) << down.out;
}


TEST_F(BundleSimTest, BareNodesRunTheBundleRefuseWhatCannotRunAndServe) {
  BareCluster c("plat-bare");
  ASSERT_TRUE(c.created());
  // The mode bites: the build's own sparkctl cannot start on a node.
  Output plain = c.Exec("spark-0", kSparkctl + " --version");
  EXPECT_NE(plain.exit_code, 0) << plain.out;
  EXPECT_NE(plain.out.find("error while loading shared libraries"), std::string::npos) << plain.out;
  Output empty = c.Exec("spark-0", "ls -A /usr/local/lib/sparkctl | wc -l");
  EXPECT_EQ(empty.out, "0\n") << "each node starts with its own empty /usr/local/lib/sparkctl";

  // discover installs the bundle on both nodes and runs `sparkctl node probe` from it.
  Output first = c.Sparkctl("--log-level info discover -c " + c.seed() + " --json");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("spark-0: installed x86_64 bundle"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("spark-1: installed x86_64 bundle"), std::string::npos) << first.out;
  // Cached by content: a second run installs nothing.
  Output second = c.Sparkctl("--log-level info discover -c " + c.seed() + " --json");
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_EQ(second.out.find("installed"), std::string::npos) << second.out;
  Output bundles = c.Exec("spark-1", "ls /usr/local/lib/sparkctl/bundles");
  EXPECT_EQ(std::count(bundles.out.begin(), bundles.out.end(), '\n'), 1) << bundles.out;
  const std::string id = bundles.out.substr(0, bundles.out.find('\n'));
  Output engine = c.Exec("spark-1", "/usr/local/lib/sparkctl/bundles/" + id +
                                        "/bin/spark-engine --version");
  EXPECT_EQ(engine.exit_code, 0) << engine.out;
  // The node's facts (from the bundle's sparkctl, on the node) carry its platform.
  Output facts = c.Exec("spark-1", "/usr/local/lib/sparkctl/bundles/" + id +
                                       "/bin/sparkctl node facts --json", /*stdout_only=*/true);
  ASSERT_EQ(facts.exit_code, 0) << facts.out;
  const nlohmann::json platform = nlohmann::json::parse(facts.out)["platform"];
  EXPECT_EQ(platform["os_name"], "Ubuntu 24.04.3 LTS") << facts.out;
  EXPECT_EQ(platform["os_id"], "ubuntu");
  EXPECT_EQ(platform["glibc"], gnu_get_libc_version());
  EXPECT_EQ(platform["machine"], spark::bundle::HostMachine());

  // A node of another machine: refused, with the fix, before anything is copied to it.
  ASSERT_EQ(c.Fault("machine spark-1 aarch64").exit_code, 0);
  Output other = c.Sparkctl("preflight --json -c " + c.seed());
  EXPECT_EQ(other.exit_code, 2) << other.out;
  for (const char* part : {"spark-1 is aarch64, Ubuntu 24.04.3 LTS", "no bundle for aarch64",
                           "SPARKCTL_BUNDLES", "scripts/build-spark.sh"}) {
    EXPECT_NE(other.out.find(part), std::string::npos) << part << " in: " << other.out;
  }
  ASSERT_EQ(c.Fault("machine spark-1 default").exit_code, 0);
  // A fresh node (nothing installed yet) whose glibc is older than the bundle's programs need.
  ASSERT_EQ(c.Exec("spark-1", "rm -rf /usr/local/lib/sparkctl/bundles").exit_code, 0);
  ASSERT_EQ(c.Fault("glibc spark-1 2.17").exit_code, 0);
  Output old = c.Sparkctl("preflight --json -c " + c.seed());
  EXPECT_EQ(old.exit_code, 2) << old.out;
  EXPECT_NE(old.out.find("glibc 2.17 is older than"), std::string::npos) << old.out;
  EXPECT_EQ(c.Exec("spark-1", "ls /usr/local/lib/sparkctl/bundles 2>/dev/null | wc -l").out, "0\n");
  ASSERT_EQ(c.Fault("clear").exit_code, 0);
  Output healthy = c.Sparkctl("preflight -c " + c.seed());
  EXPECT_NE(healthy.out.find("SSH.REACHABLE"), std::string::npos) << healthy.out;
  EXPECT_EQ(healthy.out.find("cannot run"), std::string::npos) << healthy.out;
  UpServesFromTheBundle(c);
}

}  // namespace
