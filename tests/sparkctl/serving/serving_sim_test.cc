// `sparkctl check` and `sparkctl bench serve` against a model `sparkctl up` started on a simulated
// pair of Sparks (real sshd and veth cables, the CPU engine at TP=2, the random-weight demo
// model), reached from this machine over the simulator's management network with -c CLUSTER.
// Needs root, the built sparkctl and spark-engine, python3 (to make the demo model).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

const std::string kBin = SPARK_BINARY_DIR "/bin";
const std::string kSparkctl = kBin + "/sparkctl";
const std::string kName = "srvpair";  // this test's simulated cluster

struct Output {
  int exit_code = -1;
  std::string out;   // stdout
  std::string both;  // stdout and stderr
};

Output Sh(const std::string& command) {
  Output o;
  const std::string err = "/tmp/" + kName + "-stderr";
  FILE* pipe = popen(("(" + command + ") 2>" + err).c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err);
  o.both = o.out + std::string((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  return o;
}

class ServingSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it";
    ASSERT_EQ(access((kBin + "/spark-engine").c_str(), X_OK), 0) << "spark-engine: build it";
    root_ = std::string(SPARK_BINARY_DIR) + "/serving-sim";
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    const std::string model = std::string(SPARK_BINARY_DIR) + "/up-e2e/model";
    if (!std::filesystem::exists(model + "/config.json")) {
      ASSERT_EQ(Sh("python3 " SPARK_SOURCE_DIR "/scripts/make_demo_model.py " + model).exit_code,
                0);
    }
    std::ofstream(root_ + "/key") << "sim-bench-key-0123456789abcdef\n";
    Sh(kSparkctl + " sim destroy --name " + kName);
    Output created = Sh(kSparkctl + " sim create --name " + kName + " --nodes 2 --topology pair");
    ASSERT_EQ(created.exit_code, 0) << created.both;
    Output discovered = Sh(kSparkctl + " discover -c " + Seed());
    ASSERT_EQ(discovered.exit_code, 0) << discovered.both;
    WriteProfile("0.0.0.0", model);
  }
  void TearDown() override {
    if (root_.empty()) return;
    Sh(kSparkctl + " down " + Flags());
    Sh(kSparkctl + " sim destroy --name " + kName);
    std::filesystem::remove_all(root_ + "/state");
  }

  std::string Seed() const { return "/run/sparkctl-sim/" + kName + "/cluster.yaml"; }
  std::string Flags() const { return "-c " + Seed() + " --state-root " + root_ + "/state"; }
  void WriteProfile(const std::string& bind, const std::string& model) {
    std::ofstream f(root_ + "/profile.yaml");
    f << "schema: sparkctl-profile/v1\nname: srv\nmodel:\n  repository: sparkctl/qwen3-tiny-demo\n"
         "  revision: 0000000000000000000000000000000000000001\n  path: " << model
      << "\n  served_name: srv\ntopology:\n  kind: pair\n  nodes: 2\n"
         "host:\n  kernel:\n    allow: [6.17.0-1031-nvidia, 6.17.0-1032-nvidia]\n"
         "  min_cma_mib: 64\n  memlock: \"8192\"\n  min_free_memory_gib: 0.5\n"
         "engine:\n  backend: cpu\n  tp: 2\n  context_length: 1024\n  chunked_prefill: 256\n"
         "  max_running_requests: 4\n  kv_cache:\n    dtype: fp32\n    tokens: 4096\n"
         "api:\n  port: 8011\n  bind: " << bind << "\n  key_file: " << root_ << "/key\n"
         "  max_tokens_limit: 512\n";
  }
  nlohmann::json Json(const Output& o) {
    auto j = nlohmann::json::parse(o.out, nullptr, false);
    if (j.is_discarded()) ADD_FAILURE() << "not JSON: " << o.both.substr(0, 2000);
    return j;
  }

  std::string root_;
};

TEST_F(ServingSimTest, CheckAndBenchServeAgainstTheCluster) {
  Output up = Sh(kSparkctl + " up " + Flags() + " -p " + root_ + "/profile.yaml --yes --json "
                 "--timeout 300 --engine " + kBin + "/spark-engine");
  ASSERT_EQ(up.exit_code, 0) << up.both;

  Output check = Sh(kSparkctl + " check " + Flags() +
                    " --random-weights --json --long-prompt-tokens 400 --concurrency 4");
  const nlohmann::json c = Json(check);
  EXPECT_EQ(check.exit_code, 0) << check.both;
  EXPECT_EQ(c["schema"], "sparkctl-check/v1");
  EXPECT_EQ(c["model"], "srv");
  std::map<std::string, std::string> verdicts;
  for (const auto& x : c["checks"]) verdicts[x["name"]] = x["verdict"];
  for (const char* protocol : {"models", "json_schema", "tool_call", "tool_second_turn",
                               "streaming_usage", "long_prompt", "concurrent"}) {
    EXPECT_EQ(verdicts[protocol], "pass") << protocol << ": " << check.both;
  }
  for (const char* content : {"arithmetic", "code", "thinking_on", "tool_call_auto"}) {
    EXPECT_EQ(verdicts[content], "not judged (random weights)") << content;
  }

  const std::string out = root_ + "/bench.json", svg = root_ + "/bench.svg";
  Output bench = Sh(kSparkctl + " bench serve " + Flags() +
                    " --concurrency 1,2 --context 64,256,2k --output-tokens 8 --repeats 2 --out " +
                    out + " --plot " + svg);
  EXPECT_EQ(bench.exit_code, 0) << bench.both;
  EXPECT_NE(bench.out.find("skipped: 2048 + 8 tokens exceed the model's 1024"), std::string::npos)
      << bench.out;
  std::ifstream in(out);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["identity"]["cluster"], kName);
  EXPECT_EQ(doc["exact_prompts"], true);
  EXPECT_EQ(doc["identity"]["profile_sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(doc["identity"]["build"], "unknown");
  ASSERT_EQ(doc["cells"].size(), 6u);
  for (const auto& cell : doc["cells"]) {
    if (!cell["skipped"].get<std::string>().empty()) continue;
    ASSERT_EQ(cell["rounds"].size(), 2u) << cell.dump();
    for (const auto& round : cell["rounds"]) {
      for (const auto& s : round) {
        EXPECT_TRUE(s["ok"].get<bool>()) << s.dump();
        EXPECT_EQ(s["completion_tokens"], 8) << s.dump();
        EXPECT_EQ(s["prompt_tokens"], cell["context"]) << "cut to the exact length: " << s.dump();
        // Distinct prompts: nothing of one stream's prompt came from another's cache blocks
        // beyond a block of the shared beginning.
        EXPECT_LE(s["cached_tokens"].get<int>(), 16) << s.dump();
      }
    }
    EXPECT_GT(cell["decode_tokens_per_s_aggregate"]["mean"].get<double>(), 0);
  }
  std::ifstream plot(svg);
  const std::string text((std::istreambuf_iterator<char>(plot)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  Output compare = Sh(kSparkctl + " bench serve " + Flags() +
                      " --concurrency 1 --context 64 --output-tokens 4 --repeats 1 --compare " +
                      out);
  EXPECT_EQ(compare.exit_code, 0) << compare.both;
  EXPECT_NE(compare.out.find("before -> now"), std::string::npos) << compare.out;

  // A profile that binds loopback cannot be reached from here: refused with the fix.
  WriteProfile("127.0.0.1", std::string(SPARK_BINARY_DIR) + "/up-e2e/model");
  Output local = Sh(kSparkctl + " check " + Flags());
  EXPECT_EQ(local.exit_code, 2) << local.both;
  EXPECT_NE(local.both.find("ssh -L 8011:127.0.0.1:8011"), std::string::npos) << local.both;
}

}  // namespace
