// The memory plan against the engine it plans for: `spark-engine serve` on a tiny checkpoint with
// a KV cache of tens of MiB, its resident memory (VmRSS / VmHWM from its status file, less what
// it held before loading the weights) after start-up and after requests have cycled through the
// whole cache, each within 5% of what `spark-engine plan` says for the same flags (weights + KV
// cache after start-up; plus one step's activations at the peak). The engine process itself
// (code, tokenizer, threads) is the plan's separate "engine process" item and is not compared:
// the baseline is the process's resident memory just before it loads the weights.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/engine/server/http_test_client.h"

namespace spark::engine {
namespace {

namespace fs = std::filesystem;
using server::testing::HttpCall;
using Clock = std::chrono::steady_clock;

const std::string kBinary = SPARK_BINARY_DIR "/bin/spark-engine";
const std::string kFixtures = SPARK_SOURCE_DIR "/tests/fixtures/models/";
const std::string kTokenizers = SPARK_SOURCE_DIR "/../shared/data/tokenizers/";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `spark-engine ARGS...`, stdout (and with `and_stderr` stderr) captured whole (a short
// command).
std::string RunEngine(const std::vector<std::string>& args, bool and_stderr = false) {
  std::string cmd = kBinary;
  for (const std::string& a : args) cmd += " '" + a + "'";
  if (and_stderr) cmd += " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// A serving engine: stdout read for its port, stderr to a file; killed when destroyed.
class Server {
 public:
  Server(const std::vector<std::string>& args, const fs::path& err) : err_(err) {
    int out[2];
    if (pipe(out) != 0) return;
    std::vector<std::string> argv = {kBinary, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c;
    for (std::string& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      close(out[0]);
      execv(c[0], c.data());
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  // The port of "serving NAME on http://HOST:PORT"; 0 when it did not come within 60 s.
  int WaitServing() {
    std::string text;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[512];
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return 0;
      text.append(buf, n);
      const size_t at = text.find("serving ");
      const size_t colon = text.rfind(':');
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
        return std::atoi(text.c_str() + colon + 1);
      }
    }
    return 0;
  }
  std::string err() const { return ReadFile(err_); }

 private:
  fs::path err_;
  pid_t pid_ = -1;
  int out_ = -1;
};

struct Case {
  std::string fixture;
  std::string tokenizer;
  int vocab;
  // KV blocks of 16 tokens: 150-200 MiB of cache, so that what serving itself holds (HTTP
  // buffers, requests, thread arenas: ~4-5 MiB measured) stays within the 5%.
  int blocks;
};

class MemoryPlanE2eTest : public testing::TestWithParam<Case> {};

// The status file's memory object once the ticker has written it (null after 10 s).
nlohmann::json WaitMemory(const fs::path& status) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  nlohmann::json m;
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto j = nlohmann::json::parse(ReadFile(status), nullptr, false);
    if (j.is_object() && j.contains("memory") && j["memory"].contains("baseline_resident_bytes")) {
      m = j["memory"];
      break;
    }
  }
  return m;
}

double Within(int64_t measured, int64_t planned) {
  return std::abs(static_cast<double>(measured - planned)) / static_cast<double>(planned);
}

TEST_P(MemoryPlanE2eTest, ResidentMemoryIsWithinFivePercentOfThePlan) {
  const Case& c = GetParam();
  const fs::path dir = fs::path(testing::TempDir()) / ("memory_e2e_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::vector<std::string> settings = {"--model",
                                             kFixtures + c.fixture,
                                             "--backend",
                                             "cpu",
                                             "--max-model-len",
                                             "256",
                                             "--max-num-seqs",
                                             "32",
                                             "--max-batched-tokens",
                                             "2048",
                                             "--num-kv-blocks",
                                             std::to_string(c.blocks)};
  std::vector<std::string> plan_args = {"plan", "--json", "--no-tp-sweep"};
  plan_args.insert(plan_args.end(), settings.begin(), settings.end());
  const auto plan = nlohmann::json::parse(RunEngine(plan_args), nullptr, false);
  ASSERT_TRUE(plan.is_object() && plan.contains("rank")) << plan.dump();
  int64_t weights = 0, activations = 0;
  for (const auto& item : plan["rank"]["items"]) {
    if (item["name"] == "weights") weights = item["bytes"];
    if (item["name"] == "activations") activations = item["bytes"];
  }
  const int64_t kv = plan["rank"]["kv"]["bytes"];
  ASSERT_GT(kv, 16 << 20) << "a cache big enough to measure";

  std::vector<std::string> args = settings;
  args.insert(args.end(),
              {"--tokenizer", kTokenizers + c.tokenizer, "--port", "0", "--threads", "2",
               "--status-file", (dir / "status.json").string(), "--served-model-name", "tiny"});
  Server server(args, dir / "err.log");
  const int port = server.WaitServing();
  ASSERT_GT(port, 0) << server.err();
  const nlohmann::json started = WaitMemory(dir / "status.json");
  ASSERT_FALSE(started.is_null()) << server.err();
  const int64_t baseline = started["baseline_resident_bytes"];
  const int64_t at_start = static_cast<int64_t>(started["resident_bytes"]) - baseline;
  EXPECT_LT(Within(at_start, weights + kv), 0.05)
      << "after start-up: measured " << at_start << " B, planned " << weights + kv << " B";

  // Requests of distinct random prompts whose tokens add up to more than the cache holds, 32 at
  // a time, so full prefill chunks run and every block is written: the prefix cache keeps full
  // blocks of finished requests at the back of the free list, so fresh blocks are taken first.
  const int64_t cache_tokens = int64_t{c.blocks} * 16;
  const int per_request = 250;
  const int requests = static_cast<int>(cache_tokens / per_request) + 32;
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 32; ++t) {
    clients.emplace_back([&] {
      for (int i = next++; i < requests; i = next++) {
        nlohmann::json prompt = nlohmann::json::array();
        uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
        for (int k = 0; k < per_request - 2; ++k) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          prompt.push_back(static_cast<int>((x >> 33) % static_cast<uint64_t>(c.vocab)));
        }
        const nlohmann::json body = {{"model", "tiny"},
                                     {"prompt", prompt},
                                     {"max_tokens", 2},
                                     {"temperature", 0},
                                     {"ignore_eos", true}};
        if (HttpCall(port, "POST", "/v1/completions", body.dump(),
                     {{"content-type", "application/json"}})
                .status != 200) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed, 0) << server.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // the ticker's next write
  const nlohmann::json used = WaitMemory(dir / "status.json");
  const int64_t peak = static_cast<int64_t>(used["peak_resident_bytes"]) - baseline;
  std::printf(
      "%s: after start-up %.2f MiB (plan %.2f, %+.1f%%), peak at full KV use %.2f MiB "
      "(plan %.2f, %+.1f%%)\n",
      c.fixture.c_str(), at_start / 1048576.0, (weights + kv) / 1048576.0,
      100.0 * (at_start - weights - kv) / (weights + kv), peak / 1048576.0,
      (weights + kv + activations) / 1048576.0,
      100.0 * (peak - weights - kv - activations) / (weights + kv + activations));
  EXPECT_LT(Within(peak, weights + kv + activations), 0.05)
      << "at full KV use: peak " << peak << " B, planned " << weights + kv + activations
      << " B (weights " << weights << ", KV " << kv << ", activations " << activations << ")";
  fs::remove_all(dir);
}

// The start-up guard: a floor this machine cannot keep is refused before anything loads, naming
// the numbers and the setting to change.
// `plan --num-speculative-tokens K` counts K more logits rows per running sequence (settings
// echo it); K outside serve's 0..16 is refused by name.
TEST(MemoryPlanE2eTest, DraftTokensReachThePlan) {
  auto activations = [](const std::string& drafts) -> int64_t {
    const auto plan = nlohmann::json::parse(
        RunEngine({"plan", "--json", "--no-tp-sweep", "--model", kFixtures + "qwen3-tiny",
                   "--backend", "cpu", "--max-num-seqs", "8", "--num-speculative-tokens", drafts}),
        nullptr, false);
    if (!plan.is_object() || !plan.contains("rank")) return -1;
    EXPECT_EQ(plan["settings"]["num_speculative_tokens"], std::stoi(drafts));
    for (const auto& item : plan["rank"]["items"]) {
      if (item["name"] == "activations") return item["bytes"];
    }
    return -1;
  };
  const int64_t plain = activations("0");
  ASSERT_GT(plain, 0);
  EXPECT_GT(activations("4"), plain);
  const std::string refused = RunEngine({"plan", "--model", kFixtures + "qwen3-tiny",
                                         "--num-speculative-tokens", "17"},
                                        /*and_stderr=*/true);
  EXPECT_NE(refused.find("--num-speculative-tokens 17: want 0 (no drafts) to 16"),
            std::string::npos)
      << refused;
}

// `plan --speculative-method dspark` counts the checkpoint's draft stack: more weights, KV bytes
// a token (its window records) and activations (its step buffers) than the same plan with ngram
// drafts; a checkpoint without one, and mtp, are refused by name.
TEST(MemoryPlanE2eTest, TheDsparkStackReachesThePlan) {
  auto plan = [](const std::string& method, const std::string& drafts = "4") {
    return nlohmann::json::parse(
        RunEngine({"plan", "--json", "--no-tp-sweep", "--model",
                   kFixtures + "deepseek-v41-tiny/dspark", "--backend", "cpu", "--max-num-seqs",
                   "8", "--speculative-method", method, "--num-speculative-tokens", drafts}),
        nullptr, false);
  };
  auto item = [](const nlohmann::json& p, const std::string& name) -> int64_t {
    for (const auto& i : p["rank"]["items"]) {
      if (i["name"] == name) return i["bytes"];
    }
    return -1;
  };
  const nlohmann::json ngram = plan("ngram"), dspark = plan("dspark");
  ASSERT_TRUE(ngram.is_object() && ngram.contains("rank"));
  ASSERT_TRUE(dspark.is_object() && dspark.contains("rank"));
  EXPECT_EQ(dspark["settings"]["speculative_method"], "dspark");
  EXPECT_GT(item(dspark, "weights"), item(ngram, "weights"));
  EXPECT_GT(item(dspark, "activations"), item(ngram, "activations"));
  EXPECT_GT(dspark["rank"]["kv"]["bytes_per_token"].get<int64_t>(),
            ngram["rank"]["kv"]["bytes_per_token"].get<int64_t>());
  // A draft block holds --num-speculative-tokens rows: more drafts grow dspark's step buffers
  // beyond the logits rows both methods add.
  EXPECT_GT(item(plan("dspark", "8"), "activations") - item(dspark, "activations"),
            item(plan("ngram", "8"), "activations") - item(ngram, "activations"));
  std::string refused = RunEngine({"plan", "--model", kFixtures + "qwen3-tiny",
                                   "--speculative-method", "dspark", "--num-speculative-tokens",
                                   "4"},
                                  /*and_stderr=*/true);
  EXPECT_NE(refused.find("--speculative-method dspark: checkpoint has no DSpark draft layers"),
            std::string::npos)
      << refused;
  refused = RunEngine({"plan", "--model", kFixtures + "deepseek-v41-tiny/dspark",
                       "--speculative-method", "mtp", "--num-speculative-tokens", "4"},
                      /*and_stderr=*/true);
  EXPECT_NE(refused.find("--speculative-method mtp"), std::string::npos) << refused;
}

TEST(MemoryGuardE2eTest, ServeRefusesToStartBelowTheFloor) {
  const fs::path dir = fs::path(testing::TempDir()) / ("memory_guard_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string out =
      RunEngine({"serve", "--model", kFixtures + "qwen3-tiny", "--tokenizer", kTokenizers + "qwen3",
                 "--port", "0", "--memory-floor-gib", "100000", "--admit-floor-gib", "3",
                 "--status-file", (dir / "status.json").string()});
  const auto status = nlohmann::json::parse(ReadFile(dir / "status.json"), nullptr, false);
  ASSERT_TRUE(status.is_object()) << out;
  EXPECT_EQ(status.value("phase", ""), "failed");
  const std::string message = status.value("message", "");
  EXPECT_NE(message.find("start-up memory guard: node "), std::string::npos) << message;
  EXPECT_NE(message.find("below the 100000 GiB floor"), std::string::npos) << message;
  EXPECT_NE(message.find("spark-engine plan shows every item"), std::string::npos) << message;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MemoryPlanE2eTest,
                         testing::Values(Case{"qwen3-tiny", "qwen3", 301, 16384},
                                         Case{"qwen3-moe-tiny", "qwen3", 256, 16384},
                                         Case{"deepseek-v4-tiny", "deepseek_v3", 128, 3584}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.index);
                         });

}  // namespace
}  // namespace spark::engine
