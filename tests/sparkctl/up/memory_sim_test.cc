// Memory and liveness on the simulator, end to end: a pair of simulated Sparks (real sshd, veth
// fabric, emulated /proc/meminfo), the CPU engine and the tiny demo model.
//   - `up` refuses a profile whose memory plan does not fit a node's MemAvailable, naming the node
//     and the profile key, and starts nothing;
//   - a node whose memory shrinks below the admit floor holds new requests (they are answered
//     once it recovers), below the hard floor they get a 503 naming the guard, and every request
//     gets a response or a clear error;
//   - a prefill whose steps each take longer than the hang timeout completes without a restart,
//     and a rank stopped with SIGSTOP is reported within 5 s.
// Needs root and the built sparkctl and spark-engine.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
const std::string kBin = SPARK_BINARY_DIR "/bin";
const std::string kSparkctl = kBin + "/sparkctl";
const std::string kEngine = kBin + "/spark-engine";

struct Output {
  int exit_code = -1;
  std::string out;
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
  const size_t start = text.find("{\n");
  auto j =
      nlohmann::json::parse(start == std::string::npos ? text : text.substr(start), nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// Extra profile fields of one test.
struct ProfileKnobs {
  int64_t kv_tokens = 4096;
  int chunked_prefill = 256;
  std::string env;  // "KEY: value" lines under env:
};

// A simulated pair, discovered, with a profile and a private state root; destroyed at the end.
class Pair {
 public:
  explicit Pair(std::string name) : name_(std::move(name)) {
    root_ = std::string(SPARK_BINARY_DIR) + "/memory-sim/" + name_;
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    Sh(kSparkctl + " sim destroy --name " + name_);
    created_ =
        Sh(kSparkctl + " sim create --name " + name_ + " --nodes 2 --topology pair").exit_code ==
            0 &&
        Sh(kSparkctl + " discover -c " + seed()).exit_code == 0;
  }
  ~Pair() {
    Sh(kSparkctl + " down " + Flags());
    Sh(kSparkctl + " sim destroy --name " + name_);
    std::filesystem::remove_all(root_ + "/state");
  }
  bool created() const { return created_; }
  std::string seed() const { return "/run/sparkctl-sim/" + name_ + "/cluster.yaml"; }
  std::string ProfilePath() const { return root_ + "/profile.yaml"; }
  std::string Flags() const { return "-c " + seed() + " --state-root " + root_ + "/state"; }
  Output Sparkctl(const std::string& args) const { return Sh(kSparkctl + " " + args); }
  Output Fault(const std::string& args) const {
    return Sparkctl("sim fault --name " + name_ + " " + args);
  }
  Output Up() const {
    return Sparkctl("up " + Flags() + " -p " + root_ +
                    "/profile.yaml --yes --json --timeout 240 "
                    "--engine " +
                    kEngine);
  }
  nlohmann::json Status() const { return Json(Sparkctl("status --json " + Flags()).out); }

  void WriteProfile(const ProfileKnobs& k) const {
    const std::string model = std::string(SPARK_BINARY_DIR) + "/up-e2e/model";
    if (!std::filesystem::exists(model + "/config.json")) {
      Sh("python3 " SPARK_SOURCE_DIR "/scripts/make_demo_model.py " + model);
    }
    std::ofstream f(root_ + "/profile.yaml");
    f << "schema: sparkctl-profile/v1\nname: memory-sim\nmodel:\n"
         "  repository: sparkctl/qwen3-tiny-demo\n"
         "  revision: 0000000000000000000000000000000000000001\n  path: "
      << model
      << "\n  served_name: memory-sim\ntopology:\n  kind: pair\n  nodes: 2\nhost:\n  kernel:\n"
         "    allow: [6.17.0-1031-nvidia, 6.17.0-1032-nvidia]\n  min_cma_mib: 64\n"
         "  memlock: \"8192\"\n  min_free_memory_gib: 0.5\nengine:\n  backend: cpu\n  tp: 2\n"
         "  context_length: 1024\n  chunked_prefill: "
      << k.chunked_prefill
      << "\n  max_running_requests: 4\n  kv_cache:\n    dtype: fp32\n    tokens: " << k.kv_tokens
      << "\napi:\n  port: 8000\n  bind: 127.0.0.1\n";
    if (!k.env.empty()) f << "env:\n" << k.env;
  }

  // One completion of `prompt_tokens` token ids through curl on spark-0 (the endpoint binds
  // loopback there): "HTTP_CODE BODY".
  Output Complete(int prompt_tokens, int max_tokens, int timeout_s) const {
    std::string ids;
    for (int i = 0; i < prompt_tokens; ++i) ids += (i ? "," : "") + std::to_string(100 + i * 7);
    const std::string body = "{\"model\":\"memory-sim\",\"prompt\":[" + ids +
                             "],\"max_tokens\":" + std::to_string(max_tokens) +
                             ",\"temperature\":0,\"ignore_eos\":true}";
    const std::string file = root_ + "/body." + std::to_string(next_body_++) + ".json";
    std::ofstream(file) << body;
    return Sparkctl("sim exec --name " + name_ + " spark-0 -- curl -s --max-time " +
                    std::to_string(timeout_s) + " -w ' %{http_code}' -H " +
                    "'content-type: application/json' --data @" + file +
                    " http://127.0.0.1:8000/v1/completions");
  }
  std::string Metrics() const {
    return Sparkctl("sim exec --name " + name_ +
                    " spark-0 -- curl -s --max-time 5 http://127.0.0.1:8000/metrics")
        .out;
  }
  // The engine pid of `rank` recorded by up.
  int EnginePid(int rank) const {
    std::ifstream in(root_ + "/state/" + name_ + "/state.json");
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("pids")) return 0;
    for (const auto& [k, v] : j["pids"].items()) {
      if (k == std::to_string(rank)) return v.get<int>();
    }
    return 0;
  }

 private:
  std::string name_;
  std::string root_;
  bool created_ = false;
  mutable int next_body_ = 0;
};

std::string HttpCode(const Output& o) {
  const size_t sp = o.out.rfind(' ');
  return sp == std::string::npos ? "" : o.out.substr(sp + 1, 3);
}

// The memory guard's state in a status, "" while it is unknown (null: not yet sampled, or the
// node did not answer this probe).
std::string Guard(const nlohmann::json& s) {
  return s.contains("memory_guard") && s["memory_guard"].is_string()
             ? s["memory_guard"].get<std::string>()
             : "";
}

// Polls `sparkctl status --json` until `pred` holds or `limit` passes; the last status.
template <typename Pred>
nlohmann::json WaitStatus(const Pair& p, std::chrono::seconds limit, Pred pred,
                          double* secs = nullptr) {
  const auto start = Clock::now();
  nlohmann::json s;
  while (Clock::now() - start < limit) {
    s = p.Status();
    if (pred(s)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (secs) *secs = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

class MemorySimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it";
    ASSERT_EQ(access(kEngine.c_str(), X_OK), 0) << kEngine << " is missing: build it";
  }
};

TEST_F(MemorySimTest, UpRefusesAPlanThatDoesNotFitThenGuardsAShrinkingNode) {
  Pair p("memsim");
  ASSERT_TRUE(p.created());
  // 2 M tokens of KV (~0.95 GiB a rank) beside ~0.56 GiB of weights, activations and buffers
  // on a node that has 6 GiB: below the 5 GiB floor, and the KV is what does not fit.
  p.WriteProfile({.kv_tokens = 2000000});
  ASSERT_EQ(p.Fault("memory spark-1 6291456").exit_code, 0);
  // sparkctl plan -c reads each node's MemAvailable over SSH: spark-0 fits, spark-1 does not.
  const Output plan = p.Sparkctl("plan -p " + p.ProfilePath() + " -c " + p.seed() + " --json");
  EXPECT_EQ(plan.exit_code, 2) << plan.out;
  const nlohmann::json planned = Json(plan.out);
  ASSERT_TRUE(planned.contains("engine_plan")) << plan.out;
  const nlohmann::json& nodes = planned["engine_plan"]["nodes"];
  ASSERT_EQ(nodes.size(), 2u) << plan.out;
  EXPECT_EQ(nodes[0]["name"], "spark-0");
  EXPECT_EQ(nodes[0]["ok"], true);
  EXPECT_EQ(nodes[1]["available_bytes"], int64_t{6291456} * 1024);
  EXPECT_EQ(nodes[1]["ok"], false);
  EXPECT_EQ(planned["problems"][0]["key"], "engine.kv_cache.tokens") << plan.out;
  const Output refused = p.Up();
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("the memory plan does not fit; nothing was started"),
            std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("on spark-1"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("engine.kv_cache.tokens"), std::string::npos) << refused.out;
  EXPECT_EQ(p.Status()["health"], "down");

  // The same profile fits once the node has its memory back.
  ASSERT_EQ(p.Fault("memory spark-1 default").exit_code, 0);
  p.WriteProfile({});
  const Output up = p.Up();
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_EQ(HttpCode(p.Complete(8, 4, 30)), "200");
  const nlohmann::json serving = WaitStatus(
      p, std::chrono::seconds(10), [](const nlohmann::json& s) { return Guard(s) == "ok"; });
  EXPECT_EQ(Guard(serving), "ok") << serving.dump(1);

  // The worker's node drops below the 3 GiB admit floor: a new request is held, not refused.
  ASSERT_EQ(p.Fault("memory spark-1 2097152").exit_code, 0);
  const nlohmann::json held = WaitStatus(p, std::chrono::seconds(10), [](const nlohmann::json& s) {
    return Guard(s) == "no-admit";
  });
  EXPECT_EQ(Guard(held), "no-admit") << held.dump(1);
  auto waiting = std::async(std::launch::async, [&] { return p.Complete(8, 4, 60); });
  EXPECT_EQ(waiting.wait_for(std::chrono::seconds(3)), std::future_status::timeout)
      << "answered while memory was low: " << waiting.get().out;
  EXPECT_NE(p.Metrics().find("spark:memory_guard_state{model_name=\"memory-sim\",engine=\"0\","
                             "state=\"no-admit\"} 1.0"),
            std::string::npos);
  // Memory comes back: the held request is served.
  ASSERT_EQ(p.Fault("memory spark-1 default").exit_code, 0);
  const Output served = waiting.get();
  EXPECT_EQ(HttpCode(served), "200") << served.out;

  // Below the 1 GiB hard floor: a clear 503 naming the guard, then service again on recovery.
  ASSERT_EQ(p.Fault("memory spark-1 524288").exit_code, 0);
  WaitStatus(p, std::chrono::seconds(10),
             [](const nlohmann::json& s) { return Guard(s) == "shedding"; });
  const Output shed = p.Complete(8, 4, 30);
  EXPECT_EQ(HttpCode(shed), "503") << shed.out;
  EXPECT_NE(shed.out.find("host memory is low"), std::string::npos) << shed.out;
  ASSERT_EQ(p.Fault("memory spark-1 default").exit_code, 0);
  WaitStatus(p, std::chrono::seconds(10),
             [](const nlohmann::json& s) { return Guard(s) == "ok"; });
  EXPECT_EQ(HttpCode(p.Complete(8, 4, 30)), "200");
  const std::string metrics = p.Metrics();
  EXPECT_NE(metrics.find("spark:memory_guard_trips_total{model_name=\"memory-sim\",engine=\"0\","
                         "floor=\"hard\"} 1.0"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(p.Status().value("restarts", -1), 0) << "memory pressure is no reason to restart";
}

TEST_F(MemorySimTest, LongStepsAreBusyNotHungAndAStoppedRankIsCaught) {
  Pair p("livesim");
  ASSERT_TRUE(p.created());
  // Every step with work takes 6 s, longer than the 5 s hang timeout: a 500-token prompt in
  // 256-token chunks is two of them.
  p.WriteProfile({.chunked_prefill = 256, .env = "  SPARK_TEST_STEP_DELAY_MS: \"6000\"\n"});
  const Output up = p.Up();
  ASSERT_EQ(up.exit_code, 0) << up.out;
  const int rank1 = p.EnginePid(1);
  ASSERT_GT(rank1, 0);
  auto long_prefill = std::async(std::launch::async, [&] { return p.Complete(500, 1, 120); });
  // While it runs the model stays ready: busy ranks refresh their status and move their counters.
  bool busy_seen = false;
  while (long_prefill.wait_for(std::chrono::milliseconds(500)) != std::future_status::ready) {
    const nlohmann::json s = p.Status();
    EXPECT_EQ(s.value("health", ""), "ready") << s.dump(1);
    for (const auto& r : s["ranks"]) busy_seen = busy_seen || r.value("busy", false);
  }
  const Output done = long_prefill.get();
  EXPECT_EQ(HttpCode(done), "200") << done.out;
  EXPECT_TRUE(busy_seen) << "the status never showed a busy rank";
  EXPECT_EQ(p.Status().value("restarts", -1), 0);
  EXPECT_EQ(p.EnginePid(1), rank1) << "the model was restarted";

  // A rank that stops is hung within 5 s, named.
  ASSERT_EQ(p.Sparkctl("sim exec --name livesim spark-1 -- kill -STOP " + std::to_string(rank1))
                .exit_code,
            0);
  double seen = 0;
  const nlohmann::json hung = WaitStatus(
      p, std::chrono::seconds(5),
      [](const nlohmann::json& s) { return s.value("health", "") == "degraded"; }, &seen);
  EXPECT_EQ(hung.value("health", ""), "degraded") << "within 5 s of SIGSTOP: " << hung.dump(1);
  EXPECT_NE(hung.value("reason", "").find("rank 1"), std::string::npos) << hung.dump(1);
  p.Sparkctl("sim exec --name livesim spark-1 -- kill -CONT " + std::to_string(rank1));
}

}  // namespace
