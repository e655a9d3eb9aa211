// `sparkctl up / status / down` end to end on the simulator with the CPU engine and the tiny demo
// model: real sshd, real veth fabric, one spark-engine per simulated node. Each test creates its
// own simulated cluster and destroys it. Needs root, the built sparkctl and spark-engine (with
// `serve --status-file`), and python3; the chat step needs the `openai` package.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace {

const std::string kBin = SPARK_BINARY_DIR "/bin";
const std::string kSparkctl = kBin + "/sparkctl";

// The engine under test: SPARK_UP_ENGINE when set (an engine built elsewhere), else the one built
// next to sparkctl.
std::string Engine() {
  const char* e = std::getenv("SPARK_UP_ENGINE");
  return e && *e ? e : kBin + "/spark-engine";
}

struct Output {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

Output Sh(const std::string& command) {
  Output o;
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

nlohmann::json Json(const std::string& text) {
  // --json commands print one object on stdout; stderr lines may come first.
  const size_t start = text.find("{\n");
  auto j = nlohmann::json::parse(start == std::string::npos ? text : text.substr(start), nullptr,
                                 false);
  if (j.is_discarded()) ADD_FAILURE() << "not JSON: " << text.substr(0, 600);
  return j;
}

// Why this machine cannot run the test (a skip), or "".
std::string PrerequisiteMissing() {
  if (geteuid() != 0) return "needs root (network namespaces)";
  return "";
}

// What the build should have made (a failure, not a skip), or "".
std::string BuildMissing() {
  if (access(kSparkctl.c_str(), X_OK) != 0) return kSparkctl + " is missing: build it";
  if (access(Engine().c_str(), X_OK) != 0) return Engine() + " is missing: build it";
  return "";
}

// A simulated cluster, discovered, with a profile for it and a private state root.
class Cluster {
 public:
  // `engine_extra`: more lines of the profile's engine section; `tail`: more top-level keys.
  Cluster(std::string name, int nodes, std::string topology, std::string engine_extra = "",
          std::string tail = "")
      : name_(std::move(name)),
        nodes_(nodes),
        engine_extra_(std::move(engine_extra)),
        tail_(std::move(tail)) {
    root_ = std::string(SPARK_BINARY_DIR) + "/up-e2e/" + name_;
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    Sh(kSparkctl + " sim destroy --name " + name_);
    created_ = Sh(kSparkctl + " sim create --name " + name_ + " --nodes " +
                  std::to_string(nodes) + " --topology " + topology).exit_code == 0 &&
               Sh(kSparkctl + " discover -c " + seed()).exit_code == 0;
    topology_ = topology;
    WriteProfile(topology);
  }
  void RewriteProfile() { WriteProfile(topology_); }
  ~Cluster() {
    Sh(kSparkctl + " down " + Flags());
    Sh(kSparkctl + " sim destroy --name " + name_);
    std::filesystem::remove_all(root_ + "/state");  // a monitor left behind exits without it
  }
  bool created() const { return created_; }
  std::string seed() const { return "/run/sparkctl-sim/" + name_ + "/cluster.yaml"; }
  std::string profile() const { return root_ + "/profile.yaml"; }
  std::string Flags() const { return "-c " + seed() + " --state-root " + root_ + "/state"; }
  Output Sparkctl(const std::string& args) const { return Sh(kSparkctl + " " + args); }
  Output Up(const std::string& extra = "") const {
    return Sparkctl("up " + Flags() + " -p " + profile() + " --yes --json --timeout 240 --engine " +
                    Engine() + " " + extra);
  }
  Output Fault(const std::string& args) const {
    return Sparkctl("sim fault --name " + name_ + " " + args);
  }
  nlohmann::json Status() const { return Json(Sparkctl("status --json " + Flags()).out); }

  // Engine processes in the simulated nodes' network namespaces.
  int EngineProcesses() const {
    int n = 0;
    for (int r = 0; r < nodes_; ++r) {
      Output pids = Sh("ip netns pids sparksim-" + name_ + "-spark-" + std::to_string(r));
      std::istringstream in(pids.out);
      std::string pid;
      while (in >> pid) {
        std::ifstream f("/proc/" + pid + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (cmd.find("spark-engine") != std::string::npos) ++n;
      }
    }
    return n;
  }
  // Lines of the engine logs on every node that contain `text`.
  int LogLines(const std::string& text) const {
    Output grep = Sh("grep -h -F '" + text + "' /var/log/sparkctl/" + name_ + "-rank*.log");
    int n = 0;
    for (char ch : grep.out) n += ch == '\n';
    return n;
  }
  bool HasState() const { return std::filesystem::exists(root_ + "/state/" + name_ + "/state.json"); }

  // One chat completion through the `openai` client, run on rank 0's node (the endpoint binds
  // loopback there). Returns the client's output; exit 77 when openai is missing.
  // `cacert`: the endpoint serves HTTPS with this certificate, which the client pins.
  Output Chat(const std::string& cacert = "") const {
    const std::string python = Sh("python3 -c 'import sys; print(sys.executable)'").out;
    return Sparkctl("sim exec --name " + name_ + " spark-0 -- " +
                    python.substr(0, python.find('\n')) + " " SPARK_SOURCE_DIR
                    "/tests/sparkctl/up/chat_client.py --base-url " +
                    (cacert.empty() ? "http" : "https") + "://127.0.0.1:" +
                    std::to_string(port_) + "/v1 --model up-e2e" +
                    (cacert.empty() ? "" : " --cacert " + cacert));
  }
  std::string root() const { return root_; }

 private:
  void WriteProfile(const std::string& topology) {
    const std::string model = std::string(SPARK_BINARY_DIR) + "/up-e2e/model";
    if (!std::filesystem::exists(model + "/config.json")) {
      Sh("python3 " SPARK_SOURCE_DIR "/scripts/make_demo_model.py " + model);
    }
    std::ofstream f(profile());
    f << "schema: sparkctl-profile/v1\nname: up-e2e\nmodel:\n  repository: sparkctl/qwen3-tiny-demo\n"
         "  revision: 0000000000000000000000000000000000000001\n  path: " << model
      << "\n  served_name: up-e2e\ntopology:\n  kind: " << topology << "\n  nodes: " << nodes_
      << "\nhost:\n  kernel:\n    allow: [6.17.0-1031-nvidia, 6.17.0-1032-nvidia]\n"
         "    deny:\n      - release: 7.0.0-1019-nvidia\n        reason: CmaTotal is 0 kB\n"
         "        fix: boot 6.17.0-1032-nvidia and hold it\n  min_cma_mib: 64\n"
         "  memlock: \"8192\"\n  min_free_memory_gib: 0.5\nengine:\n  backend: cpu\n  tp: "
      << nodes_ << "\n  context_length: 1024\n  chunked_prefill: 256\n  max_running_requests: 4\n  kv_cache:\n"
         "    dtype: fp32\n    tokens: 4096\n"
      << engine_extra_ << "api:\n  port: " << port_ << "\n  bind: 127.0.0.1\n" << tail_;
  }

  std::string name_;
  std::string topology_;
  int nodes_;
  std::string engine_extra_;
  std::string tail_;
  int port_ = 8000;
  std::string root_;
  bool created_ = false;
};

class UpE2eTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = PrerequisiteMissing();
    if (!missing.empty()) GTEST_SKIP() << missing;
    const std::string broken = BuildMissing();
    ASSERT_TRUE(broken.empty()) << broken;
  }
};

// Polls `sparkctl status --json` until `health` is reached; returns the last status.
nlohmann::json WaitHealth(const Cluster& c, const std::string& health, std::chrono::seconds limit,
                          double* seconds = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json s;
  while (std::chrono::steady_clock::now() - start < limit) {
    s = c.Status();
    if (s.value("health", "") == health) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  if (seconds) {
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return s;
}

void ServeChatAndStop(Cluster& c, bool kill_and_recover) {
  ASSERT_TRUE(c.created());
  Output up = c.Up();
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_EQ(Json(up.out)["action"], "started") << up.out;
  EXPECT_EQ(c.Status()["health"], "ready");
  // The ranks' rendezvous and Gloo ran over the WireGuard tunnel.
  bool control = false;
  const nlohmann::json report = Json(up.out);
  for (const auto& step : report["steps"]) {
    if (step["name"] != "control-plane") continue;
    control = true;
    EXPECT_EQ(step["result"], "ok") << step.dump();
    EXPECT_NE(step["detail"].get<std::string>().find("WireGuard (sparkctl-wg0)"),
              std::string::npos) << step.dump();
  }
  EXPECT_TRUE(control) << "no control-plane step: " << up.out;

  Output chat = c.Chat();
  if (chat.exit_code == 77) {
    ADD_FAILURE() << "the openai package is missing: run scripts/install-test-python.sh";
  } else {
    EXPECT_EQ(chat.exit_code, 0) << chat.out;
    EXPECT_NE(chat.out.find("reply ("), std::string::npos) << chat.out;
  }

  Output again = c.Up();
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(Json(again.out)["action"], "already up") << again.out;

  if (kill_and_recover) {
    ASSERT_EQ(c.Fault("kill spark-2 spark-engine").exit_code, 0);
    double seen = 0;
    nlohmann::json degraded = WaitHealth(c, "degraded", std::chrono::seconds(5), &seen);
    EXPECT_EQ(degraded["health"], "degraded") << "within 5 s of the kill: " << degraded.dump(1);
    EXPECT_NE(degraded.value("reason", "").find("rank 2"), std::string::npos) << degraded.dump(1);
    nlohmann::json recovered = WaitHealth(c, "ready", std::chrono::seconds(120));
    EXPECT_EQ(recovered["health"], "ready") << recovered.dump(1);
    EXPECT_GE(recovered.value("restarts", 0), 1);
    Output chat2 = c.Chat();
    EXPECT_TRUE(chat2.exit_code == 0 || chat2.exit_code == 77) << chat2.out;
  }

  Output down = c.Sparkctl("down " + c.Flags());
  EXPECT_EQ(down.exit_code, 0) << down.out;
  EXPECT_EQ(c.EngineProcesses(), 0) << "down leaves no engine process on any node";
  EXPECT_FALSE(c.HasState());
  EXPECT_EQ(c.Status()["health"], "down");
}

// The interpreter for the Python clients: SPARK_TEST_PYTHON when set (one with lm-eval in a
// virtual environment), else the python3 on PATH.
std::string Python() {
  const char* p = std::getenv("SPARK_TEST_PYTHON");
  if (p && *p) return p;
  const std::string out = Sh("python3 -c 'import sys; print(sys.executable)'").out;
  return out.substr(0, out.find('\n'));
}

// Prompt scoring on the endpoint `up` brings up on a simulated ring (TP=4 over the fabric, the
// vocabulary's logits gathered from four shards): the quality gate passes against the
// transformers reference the demo profile records, and lm-eval runs its tasks there with
// log-likelihoods equal to the endpoint's own scores.
TEST_F(UpE2eTest, RingServesLmEvalAndPassesTheQualityGate) {
  Cluster c("upscoring", 4, "ring", "",
            "quality:\n  text: " SPARK_SOURCE_DIR "/profiles/quality/demo.txt\n"
            "  perplexity: 184220.12\n  tolerance: 0.01\n  context: 128\n");
  ASSERT_TRUE(c.created());
  Output up = c.Up();
  ASSERT_EQ(up.exit_code, 0) << up.out;
  // The endpoint binds loopback on rank 0's node: the clients run there.
  const std::string on_node = "sim exec --name upscoring spark-0 -- ";
  Output quality = c.Sparkctl(on_node + kSparkctl +
                              " check --url http://127.0.0.1:8000 --quality --json --profile " +
                              c.profile());
  EXPECT_EQ(quality.exit_code, 0) << quality.out;
  const nlohmann::json q = Json(quality.out);
  ASSERT_TRUE(q.contains("checks") && !q["checks"].empty()) << quality.out;
  EXPECT_EQ(q["checks"][0]["verdict"], "pass") << q.dump(1);
  Output lm = c.Sparkctl(on_node + Python() + " " SPARK_SOURCE_DIR
                         "/tests/sparkctl/up/lm_eval_client.py --port 8000 --model up-e2e "
                         "--tokenizer " SPARK_BINARY_DIR "/up-e2e/model");
  if (lm.exit_code == 77) {
    ADD_FAILURE() << "lm-eval is missing: run scripts/install-test-python.sh\n" << lm.out;
  } else {
    EXPECT_EQ(lm.exit_code, 0) << lm.out;
    EXPECT_NE(lm.out.find("all ok"), std::string::npos) << lm.out;
  }
  Output down = c.Sparkctl("down " + c.Flags());
  EXPECT_EQ(down.exit_code, 0) << down.out;
}

// The ring runs its small all-reduces one-shot over the fabric cables (socket wire), the
// neighbours relaying the opposite rank, as a ring profile would on Sparks.
TEST_F(UpE2eTest, RingOfFourServesRecoversAndStops) {
  Cluster c("upring", 4, "ring", "  collectives:\n    oneshot_max_bytes: 65536\n",
            "env:\n  SPARK_LOG_LEVEL: info\n");
  ServeChatAndStop(c, /*kill_and_recover=*/true);
  EXPECT_GT(c.LogLines("one-shot transport over socket (ring topology"), 0)
      << "the ranks did not set the one-shot transport up";
}

TEST_F(UpE2eTest, PairServesAndStops) {
  Cluster c("uppair", 2, "pair");
  ServeChatAndStop(c, false);
}

TEST_F(UpE2eTest, SwitchedFourServesAndStops) {
  Cluster c("upswitch", 4, "switched");
  ServeChatAndStop(c, false);
}

// api.tls end to end: a key of another certificate stops `up` before anything runs, naming the
// file and the node; with matching files the endpoint serves HTTPS, `up` and `status` show the
// certificate's fingerprint, status's probes work, and the `openai` client pinning the
// certificate gets a reply.
TEST_F(UpE2eTest, PairServesOverTls) {
  const std::string dir = std::string(SPARK_BINARY_DIR) + "/up-e2e/uptls/tls";
  Cluster c("uptls", 2, "pair", "",
            "  tls:\n    cert: " + dir + "/cert.pem\n    key: " + dir + "/key.pem\n");
  ASSERT_TRUE(c.created());
  auto selfsigned = [&](const std::string& out, const std::string& names) {
    Output o = c.Sparkctl("tls selfsigned --out " + out + " " + names + " --force --json");
    EXPECT_EQ(o.exit_code, 0) << o.out;
    return Json(o.out);
  };
  selfsigned(dir + "/other", "--name 127.0.0.1");
  const nlohmann::json cert = selfsigned(dir, "--name 127.0.0.1");
  std::filesystem::copy_file(dir + "/other/key.pem", dir + "/key.pem",
                             std::filesystem::copy_options::overwrite_existing);
  Output mismatched = c.Up();
  EXPECT_EQ(mismatched.exit_code, 2) << mismatched.out;
  EXPECT_NE(mismatched.out.find("api.tls.key " + dir + "/key.pem does not belong to api.tls.cert"),
            std::string::npos) << mismatched.out;
  EXPECT_NE(mismatched.out.find("(on spark-0)"), std::string::npos) << mismatched.out;
  EXPECT_EQ(c.EngineProcesses(), 0);
  EXPECT_FALSE(c.HasState());

  // The names `up` will advertise, from the profile and the inventory.
  const nlohmann::json good =
      selfsigned(dir, "-c " + c.seed() + " -p " + c.profile() + " --name llm.lan");
  EXPECT_EQ(good["names"], nlohmann::json::array({"llm.lan", "127.0.0.1", "spark-0",
                                                  good["names"][3], "localhost"}))
      << good.dump();
  Output up = c.Up();
  ASSERT_EQ(up.exit_code, 0) << up.out;
  const nlohmann::json report = Json(up.out);
  EXPECT_EQ(report["endpoint"], "https://127.0.0.1:8000") << up.out;
  EXPECT_EQ(report["tls_fingerprint"], good["sha256_fingerprint"]) << up.out;
  EXPECT_NE(report["tls_fingerprint"], cert["sha256_fingerprint"]);
  EXPECT_EQ(report["clear_text"], false);
  const nlohmann::json status = c.Status();
  EXPECT_EQ(status["health"], "ready") << status.dump(1);
  EXPECT_EQ(status["tls_fingerprint"], good["sha256_fingerprint"]);
  Output chat = c.Chat(dir + "/cert.pem");
  EXPECT_EQ(chat.exit_code, 0) << chat.out;
  EXPECT_NE(chat.out.find("reply ("), std::string::npos) << chat.out;
  Output down = c.Sparkctl("down " + c.Flags());
  EXPECT_EQ(down.exit_code, 0) << down.out;
  EXPECT_EQ(c.EngineProcesses(), 0);
}

// Each failure stops `up` before anything runs: no engine process, no state.
TEST_F(UpE2eTest, BadInputStopsEarlyAndChangesNothing) {
  Cluster c("upfail", 4, "ring");
  ASSERT_TRUE(c.created());

  std::ofstream(c.profile(), std::ios::app) << "engine_typo: 1\n";
  Output bad = c.Up();
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("profile.yaml:"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("engine_typo"), std::string::npos) << bad.out;
  c.RewriteProfile();

  ASSERT_EQ(c.Fault("sshd spark-3 stop").exit_code, 0);
  Output unreachable = c.Up();
  EXPECT_EQ(unreachable.exit_code, 2);
  EXPECT_NE(unreachable.out.find("spark-3"), std::string::npos) << unreachable.out;
  ASSERT_EQ(c.Fault("sshd spark-3 start").exit_code, 0);
  EXPECT_EQ(c.EngineProcesses(), 0);
  EXPECT_FALSE(c.HasState());

  ASSERT_EQ(c.Fault("kernel spark-1 7.0.0-1019-nvidia").exit_code, 0);
  Output preflight = c.Up();
  EXPECT_EQ(preflight.exit_code, 2);
  EXPECT_NE(preflight.out.find("preflight failed; nothing was changed"), std::string::npos)
      << preflight.out;
  EXPECT_NE(preflight.out.find("spark-1"), std::string::npos) << preflight.out;
  EXPECT_NE(preflight.out.find("fix:"), std::string::npos) << preflight.out;
  EXPECT_EQ(c.EngineProcesses(), 0);
  EXPECT_FALSE(c.HasState());
}

}  // namespace
