// Runs the built spark-engine binary: `serve` with one process per tensor-parallel rank, on the
// tiny Qwen3 checkpoint over loopback. Greedy completions must equal transformers' ids (decoded
// by `spark-engine detokenize`) at TP 1 and 2, with the ranks started by serve itself or by
// hand; a killed worker must turn /ready into a 503 naming it and end the server; the status
// file must go through its phases; bad flags must be refused with a precise message.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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
using server::testing::ClientResponse;
using server::testing::HttpCall;
using Clock = std::chrono::steady_clock;

const std::string kBinary = SPARK_BINARY_DIR "/bin/spark-engine";
const std::string kModel = SPARK_SOURCE_DIR "/tests/fixtures/models/qwen3-tiny";
const std::string kTokenizer = SPARK_SOURCE_DIR "/../shared/data/tokenizers/qwen3";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One spark-engine process: stdout through a pipe, stderr to a file; killed when destroyed.
class EngineProcess {
 public:
  EngineProcess(const std::vector<std::string>& args, const fs::path& err_file)
      : err_file_(err_file) {
    int out[2];
    if (pipe(out) != 0) return;
    std::vector<std::string> argv = {kBinary};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargs;
    for (std::string& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      close(out[0]);
      execv(cargs[0], cargs.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
  }
  ~EngineProcess() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  pid_t pid() const { return pid_; }
  std::string err() const { return ReadFile(err_file_); }

  // The port from "serving NAME on http://HOST:PORT"; 0 when the line did not come in time.
  int WaitServing(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    const auto deadline = Clock::now() + timeout;
    std::string line;
    while (Clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(out_fd_, &c, 1) != 1) return 0;
      if (c != '\n') {
        line += c;
        continue;
      }
      if (line.starts_with("serving ")) return std::stoi(line.substr(line.rfind(':') + 1));
      line.clear();
    }
    return 0;
  }

  // Exit status (128 + signal when killed), or -1 if still running after `timeout`.
  int Wait(std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (exit_code_ < 0 && Clock::now() < deadline) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_;
  }

  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    kill(pid_, SIGTERM);
    return Wait(timeout);
  }

 private:
  fs::path err_file_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int exit_code_ = -1;
};

class ServeTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("serve_command_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const nlohmann::json j = nlohmann::json::parse(ReadFile(kModel + "/expected.json"));
    prompt_ = j["cases"][0]["prompt_ids"].get<std::vector<int>>();
    greedy_ = j["cases"][0]["greedy_ids"].get<std::vector<int>>();
    expected_text_ = Detokenize(greedy_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Detokenize(const std::vector<int>& ids,
                                const std::string& tokenizer = kTokenizer) {
    const std::string cmd = "echo '" + nlohmann::json(ids).dump() + "' | " + kBinary +
                            " detokenize --tokenizer " + tokenizer;
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    pclose(pipe);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::vector<std::string> ServeArgs(const std::vector<std::string>& extra) const {
    std::vector<std::string> a = {"serve",          kModel, "--tokenizer",         kTokenizer,
                                  "--port",         "0",    "--served-model-name", "tiny",
                                  "--comm-timeout", "20"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  std::unique_ptr<EngineProcess> Start(const std::string& name,
                                       const std::vector<std::string>& extra) {
    auto args = ServeArgs(extra);
    args.insert(args.begin() + 1, "--model");
    return std::make_unique<EngineProcess>(args, dir_ / (name + ".err"));
  }

  // The greedy completion of the fixture's first prompt, checked against transformers.
  void ExpectGreedyCompletion(int port, const std::string& what) {
    const nlohmann::json body = {
        {"model", "tiny"}, {"prompt", prompt_}, {"max_tokens", greedy_.size()}, {"temperature", 0}};
    const ClientResponse r = HttpCall(port, "POST", "/v1/completions", body.dump(),
                                      {{"content-type", "application/json"}});
    ASSERT_EQ(r.status, 200) << what << ": " << r.body << r.error;
    const nlohmann::json j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], expected_text_) << what;
    EXPECT_EQ(j["usage"]["completion_tokens"], greedy_.size()) << what;
  }

  static nlohmann::json StatusFile(const fs::path& p) {
    const std::string text = ReadFile(p);
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
  }

  // Polls until the status file reports `phase` (or `timeout`).
  static nlohmann::json WaitPhase(const fs::path& p, const std::string& phase,
                                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = Clock::now() + timeout;
    nlohmann::json j;
    while (Clock::now() < deadline) {
      j = StatusFile(p);
      if (!j.is_null() && j["phase"] == phase) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return j;
  }

  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
  }

  fs::path dir_;
  std::vector<int> prompt_;
  std::vector<int> greedy_;
  std::string expected_text_;
};

TEST_F(ServeTest, ChildRankProcessesGiveTheSameGreedyTokensAsOneRank) {
  ASSERT_FALSE(expected_text_.empty());
  for (int tp : {1, 2}) {
    auto serve = Start("tp" + std::to_string(tp), {"--tp", std::to_string(tp), "--threads", "2"});
    const int port = serve->WaitServing();
    ASSERT_GT(port, 0) << serve->err();
    ExpectGreedyCompletion(port, "tp " + std::to_string(tp));
    const ClientResponse ready = HttpCall(port, "GET", "/ready");
    EXPECT_EQ(ready.status, 200) << ready.body;
    EXPECT_EQ(serve->Terminate(), 0) << serve->err();
  }
}

// DSpark at TP=2 through serve: the worker rank serve starts loads its shard of the draft stack
// and drafts in lockstep (one draft plan per step), and the greedy completion is transformers'
// ids with drafts made on the way.
TEST_F(ServeTest, DsparkAtTp2GivesTheGreedyTokens) {
  const std::string model = SPARK_SOURCE_DIR "/tests/fixtures/models/deepseek-v41-tiny";
  const std::string tokenizer = SPARK_SOURCE_DIR "/../shared/data/tokenizers/deepseek_v3";
  const nlohmann::json j = nlohmann::json::parse(ReadFile(model + "/expected.json"));
  const auto prompt = j["cases"][0]["prompt_ids"].get<std::vector<int>>();
  const auto greedy = j["cases"][0]["greedy_ids"].get<std::vector<int>>();
  EngineProcess serve({"serve", "--model", model + "/dspark", "--tokenizer", tokenizer, "--port",
                       "0", "--served-model-name", "tiny", "--tp", "2", "--threads", "2",
                       "--comm-timeout", "20", "--speculative-method", "dspark",
                       "--num-speculative-tokens", "4"},
                      dir_ / "dspark.err");
  const int port = serve.WaitServing();
  ASSERT_GT(port, 0) << serve.err();
  const nlohmann::json body = {
      {"model", "tiny"}, {"prompt", prompt}, {"max_tokens", greedy.size()}, {"temperature", 0}};
  const ClientResponse r = HttpCall(port, "POST", "/v1/completions", body.dump(),
                                    {{"content-type", "application/json"}});
  ASSERT_EQ(r.status, 200) << r.body << r.error << serve.err();
  const nlohmann::json out = nlohmann::json::parse(r.body);
  EXPECT_EQ(out["choices"][0]["text"], Detokenize(greedy, tokenizer));
  EXPECT_EQ(out["usage"]["completion_tokens"], greedy.size());
  const ClientResponse metrics = HttpCall(port, "GET", "/metrics");
  const std::string drafts = "vllm:spec_decode_num_drafts_total{model_name=\"tiny\",engine=\"0\"} ";
  EXPECT_NE(metrics.body.find(drafts), std::string::npos) << metrics.body;
  EXPECT_EQ(metrics.body.find(drafts + "0\n"), std::string::npos) << "no drafts were made";
  EXPECT_EQ(serve.Terminate(), 0) << serve.err();
}

// Ranks started by hand with and without the draft model: every draft plan would need all of
// them, so both refuse at start, naming the ranks and the flag.
TEST_F(ServeTest, RanksThatDisagreeOnTheDraftModelAreRefused) {
  const std::string model = SPARK_SOURCE_DIR "/tests/fixtures/models/deepseek-v41-tiny/dspark";
  const std::string tokenizer = SPARK_SOURCE_DIR "/../shared/data/tokenizers/deepseek_v3";
  const std::string master = std::to_string(FreePort());
  auto rank = [&](int r, bool dspark) {
    std::vector<std::string> a = {"serve", "--model", model, "--tokenizer", tokenizer, "--port",
                                  "0", "--tp", "2", "--rank", std::to_string(r),
                                  "--master-port", master, "--threads", "1", "--comm-timeout",
                                  "20"};
    if (dspark) {
      a.insert(a.end(), {"--speculative-method", "dspark", "--num-speculative-tokens", "4"});
    }
    return std::make_unique<EngineProcess>(a, dir_ / ("disagree" + std::to_string(r) + ".err"));
  };
  auto worker = rank(1, false);
  auto rank0 = rank(0, true);
  EXPECT_EQ(rank0->Wait(std::chrono::seconds(60)), 2) << rank0->err();
  EXPECT_EQ(worker->Wait(std::chrono::seconds(60)), 2) << worker->err();
  for (const auto* p : {rank0.get(), worker.get()}) {
    EXPECT_NE(p->err().find("the ranks disagree on the draft model: rank(s) 0 were started with "
                            "--speculative-method dspark, rank(s) 1 without"),
              std::string::npos)
        << p->err();
  }
}

TEST_F(ServeTest, IdleGroupOutlivesTheCommunicatorDeadline) {
  // Heartbeats every comm-timeout / 4 keep the idle worker inside its 3 s deadline.
  EngineProcess serve(
      {"serve", "--model", kModel, "--tokenizer", kTokenizer, "--port", "0", "--served-model-name",
       "tiny", "--tp", "2", "--threads", "2", "--comm-timeout", "3"},
      dir_ / "idle.err");
  const int port = serve.WaitServing();
  ASSERT_GT(port, 0) << serve.err();
  std::this_thread::sleep_for(std::chrono::seconds(8));
  ExpectGreedyCompletion(port, "after 8 s idle");
  EXPECT_EQ(serve.Terminate(), 0) << serve.err();
}

TEST_F(ServeTest, SeparatelyStartedRanksServeAndShutDownTogether) {
  const std::string master = std::to_string(FreePort());
  const fs::path worker_status = dir_ / "rank1.json";
  auto worker = Start("rank1", {"--tp", "2", "--rank", "1", "--master-port", master, "--threads",
                                "1", "--status-file", worker_status.string()});
  auto rank0 =
      Start("rank0", {"--tp", "2", "--rank", "0", "--master-port", master, "--threads", "1"});
  const int port = rank0->WaitServing();
  ASSERT_GT(port, 0) << rank0->err() << worker->err();
  EXPECT_EQ(WaitPhase(worker_status, "ready")["phase"], "ready");
  ExpectGreedyCompletion(port, "separate ranks");
  EXPECT_EQ(rank0->Terminate(), 0) << rank0->err();
  // Rank 0's shutdown plan ends the worker cleanly.
  EXPECT_EQ(worker->Wait(std::chrono::seconds(20)), 0) << worker->err();
  EXPECT_EQ(StatusFile(worker_status)["phase"], "stopped");
}

TEST_F(ServeTest, StoppedWorkerBreaksASeparatelyStartedGroup) {
  const std::string master = std::to_string(FreePort());
  auto worker =
      Start("rank1", {"--tp", "2", "--rank", "1", "--master-port", master, "--threads", "1"});
  auto rank0 = Start("rank0", {"--tp", "2", "--rank", "0", "--master-port", master, "--threads",
                               "1", "--failure-grace", "10"});
  const int port = rank0->WaitServing();
  ASSERT_GT(port, 0) << rank0->err() << worker->err();
  const auto t0 = Clock::now();
  EXPECT_EQ(worker->Terminate(std::chrono::seconds(5)), 0) << worker->err();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3)) << "a worker must exit promptly on SIGTERM";
  // The next step through the group (the /ready canary) finds the peer gone.
  ClientResponse ready;
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline) {
    ready = HttpCall(port, "GET", "/ready");
    if (ready.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("tensor-parallel group broken"), std::string::npos) << ready.body;
  EXPECT_EQ(rank0->Wait(std::chrono::seconds(40)), 2) << rank0->err();
}

TEST_F(ServeTest, WorkerWhoseRankZeroDiesExitsNamingItselfAndThePeer) {
  const std::string master = std::to_string(FreePort());
  const fs::path worker_status = dir_ / "rank1.json";
  auto worker = Start("rank1", {"--tp", "2", "--rank", "1", "--master-port", master, "--threads",
                                "1", "--status-file", worker_status.string()});
  auto rank0 =
      Start("rank0", {"--tp", "2", "--rank", "0", "--master-port", master, "--threads", "1"});
  ASSERT_GT(rank0->WaitServing(), 0) << rank0->err() << worker->err();
  ASSERT_EQ(WaitPhase(worker_status, "ready")["phase"], "ready");
  kill(rank0->pid(), SIGKILL);
  EXPECT_EQ(rank0->Wait(std::chrono::seconds(10)), 128 + SIGKILL);
  EXPECT_EQ(worker->Wait(std::chrono::seconds(15)), 2) << worker->err();
  const std::string err = worker->err();
  EXPECT_NE(err.find("rank 1 of 2: lost the tensor-parallel group (rank 0 at 127.0.0.1:" + master),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[127.0.0.1]:"), std::string::npos) << "the peer's address: " << err;
  const nlohmann::json j = StatusFile(worker_status);
  EXPECT_EQ(j["phase"], "failed") << j;
}

TEST_F(ServeTest, KilledChildRankMakesReadyFailNamingItThenTheServerExits) {
  const fs::path status = dir_ / "status.json";
  auto serve = Start("kill", {"--tp", "2", "--threads", "2", "--failure-grace", "10",
                              "--status-file", status.string()});
  const int port = serve->WaitServing();
  ASSERT_GT(port, 0) << serve->err();
  ExpectGreedyCompletion(port, "before the kill");
  const nlohmann::json child = WaitPhase(status.string() + ".rank1", "ready");
  ASSERT_EQ(child["phase"], "ready") << child;
  ASSERT_EQ(child["rank"], 1);
  const pid_t worker = child["pid"].get<pid_t>();
  ASSERT_NE(worker, serve->pid());
  ASSERT_EQ(kill(worker, SIGKILL), 0);
  const auto killed = Clock::now();
  ClientResponse ready;
  while (Clock::now() - killed < std::chrono::seconds(5)) {
    ready = HttpCall(port, "GET", "/ready");
    if (ready.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("rank 1 was killed by signal 9"), std::string::npos) << ready.body;
  const nlohmann::json mine = StatusFile(status);
  EXPECT_EQ(mine["phase"], "failed") << mine;
  EXPECT_NE(mine["message"].get<std::string>().find("rank 1"), std::string::npos) << mine;
  // After the grace period the server drains and exits non-zero for its supervisor.
  EXPECT_EQ(serve->Wait(std::chrono::seconds(30)), 2) << serve->err();
  EXPECT_NE(serve->err().find("rank 1 was killed by signal 9"), std::string::npos) << serve->err();
}

TEST_F(ServeTest, StatusFileGoesThroughThePhasesAndEndsStopped) {
  const fs::path status = dir_ / "rank{rank}.json";
  auto serve = Start("phases", {"--tp", "2", "--threads", "2", "--status-file", status.string()});
  const int port = serve->WaitServing();
  ASSERT_GT(port, 0) << serve->err();
  const nlohmann::json r0 = WaitPhase(dir_ / "rank0.json", "ready");
  EXPECT_EQ(r0["phase"], "ready") << r0;
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["world_size"], 2);
  EXPECT_EQ(r0["pid"], serve->pid());
  EXPECT_DOUBLE_EQ(r0["progress"].get<double>(), 1.0);
  EXPECT_NE(r0["message"].get<std::string>().find(std::to_string(port)), std::string::npos);
  const nlohmann::json r1 = WaitPhase(dir_ / "rank1.json", "ready");
  EXPECT_EQ(r1["phase"], "ready") << r1;
  EXPECT_EQ(r1["rank"], 1);
  EXPECT_NE(r1["pid"], serve->pid());
  EXPECT_EQ(serve->Terminate(), 0) << serve->err();
  EXPECT_EQ(StatusFile(dir_ / "rank0.json")["phase"], "stopped");
  EXPECT_EQ(StatusFile(dir_ / "rank1.json")["phase"], "stopped");
  // Every phase change is in the log, in order (rank 0's lines carry "r0").
  const std::string err = serve->err();
  size_t at = 0;
  for (const char* phase : {"starting", "connecting", "loading", "warming", "ready", "stopped"}) {
    const size_t found = err.find("rank 0/2 phase " + std::string(phase), at);
    EXPECT_NE(found, std::string::npos) << "phase " << phase << " missing or out of order:\n"
                                        << err;
    if (found != std::string::npos) at = found;
  }
}

struct BadFlagCase {
  std::vector<std::string> flags;
  std::string message;
};

// The profile fields that reach serve as flags: a KV cache from a fraction of the memory left
// after the weights (both ranks agree on one count), no prefix cache, a small prefill chunk and
// the parsers of the model's own chat format; greedy tokens are unchanged.
TEST_F(ServeTest, MemoryFractionChunkAndCacheFlagsServeTheSameTokens) {
  auto serve = Start("flags", {"--tp", "2", "--threads", "2", "--kv-memory-fraction", "0.0005",
                               "--no-prefix-caching", "--max-batched-tokens", "4",
                               "--reasoning-parser", "qwen3", "--tool-parser", "qwen3"});
  const int port = serve->WaitServing();
  ASSERT_GT(port, 0) << serve->err();
  ExpectGreedyCompletion(port, "with the profile's flags");
  EXPECT_EQ(serve->Terminate(), 0) << serve->err();
  const std::string err = serve->err();
  EXPECT_NE(err.find("rank 0: KV cache from 0.0005 of the"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1: KV cache from 0.0005 of the"), std::string::npos) << err;
}

// An open endpoint without a key is refused before any weight loads: the status file never
// leaves "starting" for "loading".
TEST_F(ServeTest, OpenHostWithoutAKeyIsRefusedBeforeLoading) {
  auto serve = Start("open", {"--host", "0.0.0.0"});
  EXPECT_EQ(serve->Wait(std::chrono::seconds(30)), 2);
  const std::string err = serve->err();
  EXPECT_NE(err.find("--host 0.0.0.0 is not a loopback address: an API key is required"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("loading"), std::string::npos) << "refused before loading:\n" << err;
}

TEST_F(ServeTest, BadFlagsAreRefusedPrecisely) {
  const std::vector<BadFlagCase> cases = {
      {{"--tp", "2", "--rank", "2"}, "--rank 2 is outside [0, --tp 2)"},
      {{"--tp", "2", "--rank", "-1"}, "--rank -1 is outside [0, --tp 2)"},
      {{"--rank", "1"}, "--rank 1 needs --tp N"},
      {{"--tp", "0"}, "--tp 0: must be >= 1"},
      {{"--tp", "2", "--master-addr", "10.0.0.1"}, "--master-addr needs --rank"},
      {{"--tp", "2", "--rank", "1", "--master-port", "70000"}, "--master-port 70000"},
      {{"--block-size", "0"}, "--block-size must be >= 1"},
      {{"--weight-dtype", "fp4"},
       "--weight-dtype: unknown weight type 'fp4' (choose fp32, bf16 or fp8)"},
      {{"--kv-dtype", "fp8"},
       "--kv-dtype: 'fp8' is not a KV cache type (choose auto, fp32 or bf16)"},
      {{"--status-file", "/nonexistent-dir/status.json"}, "/nonexistent-dir/status.json"},
      {{"--kv-memory-fraction", "0.95"}, "--kv-memory-fraction 0.95: must be in (0, 0.9]"},
      {{"--kv-memory-fraction", "0.5", "--num-kv-blocks", "8"},
       "--kv-memory-fraction and --num-kv-blocks both size the KV cache: give one"},
      {{"--no-chunked-prefill", "--max-batched-tokens", "64", "--max-model-len", "128"},
       "--max-batched-tokens (64) must be >= --max-model-len (128)"},
      {{"--reasoning-parser", "deepseek_v4"},
       "--reasoning-parser deepseek_v4: this model's chat format is qwen3"},
      {{"--tool-parser", "deepseek_v4"}, "--tool-parser deepseek_v4: this model's chat format"},
  };
  for (const BadFlagCase& c : cases) {
    auto serve = Start("bad", c.flags);
    const int rc = serve->Wait(std::chrono::seconds(30));
    const std::string err = serve->err();
    EXPECT_EQ(rc, 2) << c.message << "\n" << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << "want '" << c.message << "' in:\n" << err;
  }
}

}  // namespace
}  // namespace spark::engine
