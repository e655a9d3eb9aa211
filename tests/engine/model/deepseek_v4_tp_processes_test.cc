// Tensor parallelism across processes for DeepSeek-V4: runs the built `spark-engine generate` on
// the committed tiny fixture with --tp 1, 2 and 4 (one process per rank, Gloo over loopback) and
// checks that every world size prints exactly the greedy tokens transformers' `generate`
// recorded in the fixture's expected.json (scripts/fixtures/make_deepseek_v4_fixture.py).
// Both prompts go in one run, so they are batched together through the scheduler. A second test
// adds chunked prefill off the compression grid and a second round served from the prefix cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kEngine = SPARK_BINARY_DIR "/bin/spark-engine";
const std::string kFixture = SPARK_SOURCE_DIR "/tests/fixtures/models/deepseek-v4-tiny";

struct Expected {
  std::vector<std::vector<int>> prompts;
  std::vector<std::vector<int>> greedy;
};

Expected LoadExpected() {
  std::ifstream in(kFixture + "/expected.json");
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

class DeepseekV4TpProcessesTest : public ::testing::TestWithParam<int> {};

TEST_P(DeepseekV4TpProcessesTest, GreedyTokensMatchTransformers) {
  ASSERT_EQ(access(kEngine.c_str(), X_OK), 0) << kEngine << " is not built";
  const Expected expected = LoadExpected();
  ASSERT_EQ(expected.prompts.size(), 2u);
  const int tp = GetParam();
  const std::string cmd = kEngine + " generate --model " + kFixture + " --prompt-ids '" +
                          JoinIds(expected.prompts) + "' --print-ids --temperature 0" +
                          " --max-tokens " + std::to_string(expected.greedy[0].size()) +
                          " --ignore-eos --threads " + std::to_string(tp) + " --tp " +
                          std::to_string(tp);
  const RunResult r = RunShell(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\nstderr:\n" << r.err;
  const std::vector<std::vector<int>> got = ParseIdLines(r.out);
  ASSERT_EQ(got.size(), expected.greedy.size()) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], expected.greedy[i]) << "prompt " << i << " at --tp " << tp;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeepseekV4TpProcessesTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Tp" + std::to_string(info.param);
                         });

// 13-token chunks end off the CSA (4) and HCA (8) grids; the second round reuses the first
// round's 4-token blocks, so the compressor and indexer state comes from the prefix cache.
TEST(DeepseekV4TpProcessesTest, ChunkedPrefillAndPrefixCacheAcrossTwoRanks) {
  ASSERT_EQ(access(kEngine.c_str(), X_OK), 0) << kEngine << " is not built";
  const Expected expected = LoadExpected();
  const std::string cmd =
      kEngine + " generate --model " + kFixture + " --prompt-ids '" + JoinIds(expected.prompts) +
      "' --print-ids --print-stats" + " --temperature 0 --max-tokens " +
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

}  // namespace
