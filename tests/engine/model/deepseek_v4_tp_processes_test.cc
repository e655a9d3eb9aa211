// Tensor parallelism across processes for DeepSeek-V4 and V4.1: runs the built `spark-engine
// generate` on the committed tiny fixtures with --tp 1, 2 and 4 (one process per rank, Gloo over
// loopback) and checks that every world size prints exactly the greedy tokens the reference
// recorded in the fixture's expected.json (scripts/fixtures/make_deepseek_v4_fixture.py,
// make_deepseek_v41_fixtures.py: V4.1's are a full-sequence argmax per step, EOS not masked,
// which --ignore-eos reproduces). All prompts go in one run, so they are batched together through
// the scheduler. A second test adds chunked prefill off the compression grids and a second round
// served from the prefix cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

const std::string kEngine = SPARK_BINARY_DIR "/bin/spark-engine";
const std::string kFixtures = SPARK_SOURCE_DIR "/tests/fixtures/models/";

// A checkpoint directory and the extra flags it needs (V4.1's FP8/FP4 release variant shares the
// base directory's tokenizer-derived Engram token map).
struct Fixture {
  std::string name;
  std::string dir;
  std::string flags;
};

const Fixture kCheckpoints[] = {
    {"V4", kFixtures + "deepseek-v4-tiny", ""},
    {"V41", kFixtures + "deepseek-v41-tiny", ""},
    {"V41Release", kFixtures + "deepseek-v41-tiny/release",
     " --tokenizer " + kFixtures + "deepseek-v41-tiny"},
};

struct Expected {
  std::vector<std::vector<int>> prompts;
  std::vector<std::vector<int>> greedy;
};

Expected LoadExpected(const Fixture& f) {
  std::ifstream in(f.dir + "/expected.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  Expected e;
  for (const nlohmann::json& c : doc.at("cases")) {
    e.prompts.push_back(c.at("prompt_ids").get<std::vector<int>>());
    e.greedy.push_back(c.at("greedy_ids").get<std::vector<int>>());
  }
  return e;
}

std::string JoinIds(const std::vector<std::vector<int>>& prompts) {
  std::string s;
  for (size_t p = 0; p < prompts.size(); ++p) {
    if (p) s += ";";
    for (size_t i = 0; i < prompts[p].size(); ++i) {
      s += (i ? "," : "") + std::to_string(prompts[p][i]);
    }
  }
  return s;
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through the shell; stdout is returned, stderr kept for failure messages.
RunResult RunShell(const std::string& command) {
  char err_path[] = "/tmp/dsv4_tp_stderr_XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd >= 0) close(fd);
  RunResult r;
  FILE* pipe = popen((command + " 2>" + err_path).c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  r.err = text.str();
  unlink(err_path);
  return r;
}

// The JSON arrays printed by --print-ids, one line per request.
std::vector<std::vector<int>> ParseIdLines(const std::string& out) {
  std::vector<std::vector<int>> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '[') continue;
    lines.push_back(nlohmann::json::parse(line).get<std::vector<int>>());
  }
  return lines;
}

class DeepseekV4TpProcessesTest : public ::testing::TestWithParam<std::tuple<Fixture, int>> {};

TEST_P(DeepseekV4TpProcessesTest, GreedyTokensMatchTransformers) {
  ASSERT_EQ(access(kEngine.c_str(), X_OK), 0) << kEngine << " is not built";
  const auto& [fixture, tp] = GetParam();
  const Expected expected = LoadExpected(fixture);
  ASSERT_GE(expected.prompts.size(), 2u);
  const std::string cmd = kEngine + " generate --model " + fixture.dir + fixture.flags +
                          " --prompt-ids '" + JoinIds(expected.prompts) +
                          "' --print-ids --temperature 0" + " --max-tokens " +
                          std::to_string(expected.greedy[0].size()) + " --ignore-eos --threads " +
                          std::to_string(tp) + " --tp " + std::to_string(tp);
  const RunResult r = RunShell(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\nstderr:\n" << r.err;
  const std::vector<std::vector<int>> got = ParseIdLines(r.out);
  ASSERT_EQ(got.size(), expected.greedy.size()) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], expected.greedy[i]) << "prompt " << i << " at --tp " << tp;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeepseekV4TpProcessesTest,
                         ::testing::Combine(::testing::ValuesIn(kCheckpoints),
                                            ::testing::Values(1, 2, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<Fixture, int>>& info) {
                           return std::get<0>(info.param).name + "Tp" +
                                  std::to_string(std::get<1>(info.param));
                         });

class DeepseekV4ChunkedProcessesTest : public ::testing::TestWithParam<Fixture> {};

// 13-token chunks end off the CSA (4), HCA (8), V4.1 ratio-2 and candidate-block grids; the
// second round reuses the first round's 4-token blocks, so the compressor, indexer and Engram
// state comes from the prefix cache.
TEST_P(DeepseekV4ChunkedProcessesTest, ChunkedPrefillAndPrefixCacheAcrossTwoRanks) {
  ASSERT_EQ(access(kEngine.c_str(), X_OK), 0) << kEngine << " is not built";
  const Fixture& fixture = GetParam();
  const Expected expected = LoadExpected(fixture);
  const std::string cmd =
      kEngine + " generate --model " + fixture.dir + fixture.flags + " --prompt-ids '" +
      JoinIds(expected.prompts) + "' --print-ids --print-stats" + " --temperature 0 --max-tokens " +
      std::to_string(expected.greedy[0].size()) +
      " --ignore-eos --threads 2 --tp 2 --max-batched-tokens 13" + " --block-size 4 --repeat 2";
  const RunResult r = RunShell(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\nstderr:\n" << r.err;
  const std::vector<std::vector<int>> got = ParseIdLines(r.out);
  ASSERT_EQ(got.size(), 2 * expected.greedy.size()) << "stdout:\n" << r.out;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], expected.greedy[i % expected.greedy.size()]) << "request " << i;
  }
  const std::string stats_line = r.out.substr(r.out.rfind('{'));
  const nlohmann::json stats = nlohmann::json::parse(stats_line);
  size_t prompt_tokens = 0;
  for (const auto& p : expected.prompts) prompt_tokens += p.size();
  EXPECT_GT(stats.at("prefix_hits").get<int64_t>(), 0) << stats_line;
  EXPECT_LT(stats.at("prompt_tokens_computed").get<size_t>(), 2 * prompt_tokens) << stats_line;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, DeepseekV4ChunkedProcessesTest,
                         ::testing::Values(kCheckpoints[0], kCheckpoints[1]),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           return info.param.name;
                         });

}  // namespace
