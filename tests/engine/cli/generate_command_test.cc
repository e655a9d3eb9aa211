// Runs the built spark-engine binary: `generate` on the runtime Engine with 1, 2 and 4 rank
// processes over Gloo, prefix caching on and off, chunked prefill, and a rank that dies.
// Expected tokens are transformers' greedy ids from tests/fixtures/models/*/expected.json.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace spark::engine {
namespace {

const std::string kBinary = SPARK_BINARY_DIR "/bin/spark-engine";
const std::string kFixtures = SPARK_SOURCE_DIR "/tests/fixtures/models/";

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs spark-engine with `args` under `timeout` (so a hang fails the test instead of ctest).
RunResult RunEngine(const std::string& args, int timeout_s = 120) {
  const std::string err_file = std::filesystem::temp_directory_path() /
                               ("spark_generate_test_" + std::to_string(getpid()) + ".err");
  const std::string cmd =
      "timeout -k 5 " + std::to_string(timeout_s) + " " + kBinary + " " + args + " 2>" + err_file;
  RunResult r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int st = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_file);
  return r;
}

struct Fixture {
  std::vector<std::vector<int>> prompts;
  std::vector<std::vector<int>> greedy;
};

Fixture LoadFixture(const std::string& model) {
  std::ifstream in(kFixtures + model + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  Fixture f;
  for (const auto& c : j.at("cases")) {
    f.prompts.push_back(c.at("prompt_ids").get<std::vector<int>>());
    f.greedy.push_back(c.at("greedy_ids").get<std::vector<int>>());
  }
  return f;
}

// "--prompt-ids a,b;c,d" for every case of the fixture.
std::string PromptArg(const Fixture& f) {
  std::string s;
  for (const auto& p : f.prompts) {
    if (!s.empty()) s += ';';
    for (size_t i = 0; i < p.size(); ++i) s += (i ? "," : "") + std::to_string(p[i]);
  }
  return "--prompt-ids '" + s + "'";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Runs every prompt of `model` (repeated `rounds` times) and checks the tokens; returns the
// --print-stats line.
nlohmann::json GenerateAndCheck(const std::string& model, int tp, const std::string& extra,
                                int rounds = 1, std::string* err = nullptr) {
  const Fixture f = LoadFixture(model);
  const RunResult r = RunEngine("generate --model " + kFixtures + model + " " + PromptArg(f) +
                                " --max-tokens " + std::to_string(f.greedy.front().size()) +
                                " --temperature 0 --print-ids --print-stats --tp " +
                                std::to_string(tp) + " --threads " + std::to_string(tp) +
                                " --comm-timeout 30 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (err != nullptr) *err = r.err;
  const std::vector<std::string> lines = Lines(r.out);
  const size_t want = f.prompts.size() * rounds;
  EXPECT_EQ(lines.size(), want + 1) << r.out << r.err;
  if (lines.size() != want + 1) return {};
  for (size_t i = 0; i < want; ++i) {
    EXPECT_EQ(nlohmann::json::parse(lines[i]).get<std::vector<int>>(),
              f.greedy[i % f.prompts.size()])
        << model << " tp=" << tp << " " << extra << " request " << i;
  }
  return nlohmann::json::parse(lines.back());
}

struct TpCase {
  const char* model;
  int tp;
};

class GenerateTpTest : public testing::TestWithParam<TpCase> {};

TEST_P(GenerateTpTest, GreedyMatchesTransformers) {
  GenerateAndCheck(GetParam().model, GetParam().tp, "");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GenerateTpTest,
                         testing::Values(TpCase{"qwen3-tiny", 1}, TpCase{"qwen3-tiny", 2},
                                         TpCase{"qwen3-tiny", 4}, TpCase{"qwen3-moe-tiny", 1},
                                         TpCase{"qwen3-moe-tiny", 2}, TpCase{"qwen3-moe-tiny", 4}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           for (char& c : name) c = std::isalnum(c) ? c : '_';
                           return name + "_tp" + std::to_string(info.param.tp);
                         });

// The same greedy tokens with the one-shot transport carrying every all-reduce of up to 64 KiB
// (the ring topology: ranks 0 and 2 of four exchange through a neighbour) and Gloo the rest.
class GenerateOneShotTest : public testing::TestWithParam<TpCase> {};

TEST_P(GenerateOneShotTest, GreedyMatchesTransformers) {
  std::string err;
  GenerateAndCheck(GetParam().model, GetParam().tp,
                   "--oneshot-max-bytes 65536 --oneshot-topology ring --log-level info", 1, &err);
  EXPECT_NE(err.find("rank 0: all-reduces up to 65536 bytes one-shot over socket"),
            std::string::npos)
      << err;
  // The model's collectives went through it, not only the set-up.
  const size_t at = err.find("rank 0: ");
  const size_t count = err.find(" collective(s) one-shot", at);
  ASSERT_NE(count, std::string::npos) << err;
  const size_t start = err.rfind(' ', count - 1) + 1;
  EXPECT_GT(std::stoi(err.substr(start, count - start)), 10) << err;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GenerateOneShotTest,
                         testing::Values(TpCase{"qwen3-tiny", 2}, TpCase{"qwen3-tiny", 4},
                                         TpCase{"qwen3-moe-tiny", 2},
                                         TpCase{"qwen3-moe-tiny", 4}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           for (char& c : name) c = std::isalnum(c) ? c : '_';
                           return name + "_tp" + std::to_string(info.param.tp);
                         });

TEST(GenerateTest, PrefixCacheHitsGiveSameTokens) {
  for (const char* model : {"qwen3-tiny", "qwen3-moe-tiny"}) {
    const nlohmann::json on = GenerateAndCheck(model, 2, "--block-size 4 --repeat 2", 2);
    const nlohmann::json off =
        GenerateAndCheck(model, 2, "--block-size 4 --repeat 2 --no-prefix-caching", 2);
    ASSERT_FALSE(on.is_null());
    ASSERT_FALSE(off.is_null());
    // The second round finds the first round's full prompt blocks.
    EXPECT_GT(on["prefix_hits"].get<int>(), 0) << on;
    EXPECT_EQ(off["prefix_hits"].get<int>(), 0) << off;
    EXPECT_LT(on["prompt_tokens_computed"].get<int>(), off["prompt_tokens_computed"].get<int>());
  }
}

TEST(GenerateTest, ChunkedPrefillGivesSameTokens) {
  for (int tp : {1, 4}) {
    for (const char* model : {"qwen3-tiny", "qwen3-moe-tiny"}) {
      const nlohmann::json stats =
          GenerateAndCheck(model, tp, "--block-size 4 --max-batched-tokens 5");
      ASSERT_FALSE(stats.is_null());
      // 41 prompt tokens at 5 per step cannot fit the 12 steps of an unchunked run.
      EXPECT_GT(stats["num_steps"].get<int>(), 12) << stats;
    }
  }
}

// --weight-dtype fp8 end to end on two ranks: the weights are quantised on load (E4M3, 128 x 128
// block scales), the KV cache pairs with them as bf16, and every prompt gets its 12 tokens.
TEST(GenerateTest, Fp8WeightsGenerate) {
  const Fixture f = LoadFixture("qwen3-tiny");
  const RunResult r =
      RunEngine("--log-level info generate --model " + kFixtures + "qwen3-tiny " + PromptArg(f) +
                " --max-tokens 12 --temperature 0 --ignore-eos --print-ids --tp 2"
                " --threads 2 --comm-timeout 30 --weight-dtype fp8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), f.prompts.size()) << r.out;
  for (const std::string& line : lines) {
    EXPECT_EQ(nlohmann::json::parse(line).size(), 12u) << line;
  }
  EXPECT_NE(r.err.find("(fp8 weights)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(bf16, "), std::string::npos) << r.err;  // the KV cache's type
}

TEST(GenerateTest, RankThatExitsEarlyIsNamed) {
  for (int tp : {2, 4}) {
    const std::string dead = std::to_string(tp - 1);
    const RunResult r = RunEngine("generate --model " + kFixtures +
                                      "qwen3-tiny --prompt-ids 5,17,42 --max-tokens 12 --print-ids "
                                      "--comm-timeout 20 --tp " +
                                      std::to_string(tp) + " --threads " + std::to_string(tp) +
                                      " --test-exit-rank " + dead,
                                  90);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("rank " + dead + " exited with status 3"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 60) << "the launcher waited for a timeout instead of the dead rank";
  }
}

// --speculative-method ngram: transformers' greedy tokens at TP 1 and 2 (the drafts travel to
// the worker ranks with the plans), with chunked prefill and a second round hitting the prefix
// cache, on every family (DeepSeek's compressor, indexer and Engram state included); the
// counters reach --print-stats.
TEST(GenerateTest, NgramSpeculationGivesTheSameTokens) {
  for (int tp : {1, 2}) {
    for (const char* model :
         {"qwen3-tiny", "qwen3-moe-tiny", "deepseek-v4-tiny", "deepseek-v41-tiny"}) {
      const nlohmann::json stats = GenerateAndCheck(
          model, tp,
          "--block-size 4 --max-batched-tokens 8 --repeat 2 --speculative-method ngram "
          "--num-speculative-tokens 4 --prompt-lookup-max 3",
          2);
      ASSERT_FALSE(stats.is_null());
      EXPECT_GT(stats["prefix_hits"].get<int>(), 0) << stats;
      EXPECT_GT(stats["spec_decode_num_drafts"].get<int>(), 0) << stats;
      EXPECT_GE(stats["spec_decode_num_draft_tokens"].get<int>(),
                stats["spec_decode_num_accepted_tokens"].get<int>())
          << stats;
      const auto per_pos = stats["spec_decode_num_accepted_tokens_per_pos"].get<std::vector<int>>();
      EXPECT_EQ(per_pos.size(), 4u) << stats;
      int sum = 0;
      for (int n : per_pos) sum += n;
      EXPECT_EQ(sum, stats["spec_decode_num_accepted_tokens"].get<int>()) << stats;
    }
  }
}

// DSpark with the checkpoint's draft stack (the dspark fixture: the base V4.1 model plus a
// random stack): the real binary, at --tp 1 and 2 (ranks as processes drafting in lockstep),
// gives transformers' greedy ids with drafts on every step, through chunked prefill and
// prefix-cache hits.
TEST(GenerateTest, DsparkSpeculationGivesTheSameTokens) {
  const Fixture f = LoadFixture("deepseek-v41-tiny");
  for (int tp : {1, 2}) {
    const RunResult r = RunEngine(
        "generate --model " + kFixtures + "deepseek-v41-tiny/dspark " + PromptArg(f) +
        " --max-tokens " + std::to_string(f.greedy.front().size()) +
        " --temperature 0 --print-ids --print-stats --comm-timeout 30 --block-size 4 "
        "--max-batched-tokens 8 --repeat 2 --speculative-method dspark "
        "--num-speculative-tokens 4 --tp " + std::to_string(tp) + " --threads " +
        std::to_string(tp));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<std::string> lines = Lines(r.out);
    ASSERT_EQ(lines.size(), 2 * f.prompts.size() + 1) << r.out;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      EXPECT_EQ(nlohmann::json::parse(lines[i]).get<std::vector<int>>(),
                f.greedy[i % f.prompts.size()])
          << "tp " << tp << " request " << i;
    }
    const nlohmann::json stats = nlohmann::json::parse(lines.back());
    EXPECT_GT(stats["prefix_hits"].get<int>(), 0) << stats;
    EXPECT_GT(stats["spec_decode_num_drafts"].get<int>(), 0) << stats;
  }
}

// dspark needs a checkpoint with DSpark draft layers (the refusal says what it holds and what
// works instead), their tensors must all be there, mtp is refused by name, and so is a count
// without a method.
TEST(GenerateTest, SpeculationItCannotRunIsRefused) {
  RunResult r = RunEngine("generate --model " + kFixtures +
                          "qwen3-tiny --prompt-ids 5,17 --speculative-method dspark "
                          "--num-speculative-tokens 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--speculative-method dspark: checkpoint has no DSpark draft layers "
                       "(model type qwen3; DSpark is DeepSeek-V4.1's); use method ngram"),
            std::string::npos)
      << r.err;
  // The base V4.1 fixture declares 3 draft layers but ships none of their tensors.
  r = RunEngine("generate --model " + kFixtures +
                "deepseek-v41-tiny --prompt-ids 5,17 --print-ids --speculative-method dspark "
                "--num-speculative-tokens 4");
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tensor 'mtp.0.hc_attn_fn' is missing"), std::string::npos) << r.err;
  r = RunEngine("generate --model " + kFixtures +
                "deepseek-v41-tiny --prompt-ids 5,17 --speculative-method mtp "
                "--num-speculative-tokens 5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("speculative method 'mtp' is not implemented (DeepSeek-V4.1's mtp.* layers "
                       "are DSpark stages: use method dspark)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("checkpoint has 3 DSpark draft layers (mtp.0..2: block 5, noise token "
                       "127, Markov rank 256, 128 experts top 3, reading backbone layers 0, 2, "
                       "4)"),
            std::string::npos)
      << r.err;
  r = RunEngine("generate --model " + kFixtures +
                "deepseek-v41-tiny/dspark --prompt-ids 5,17 --speculative-method dspark "
                "--num-speculative-tokens 4 --prompt-lookup-min 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--speculative-method dspark: prompt_lookup_min applies to speculative "
                       "method ngram only"),
            std::string::npos)
      << r.err;
  r = RunEngine("generate --model " + kFixtures +
                "qwen3-tiny --prompt-ids 5,17 --num-speculative-tokens 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--num-speculative-tokens 3 needs --speculative-method ngram or dspark"),
            std::string::npos)
      << r.err;
}

TEST(GenerateTest, BadRankIsRejected) {
  const RunResult r = RunEngine("generate --model " + kFixtures +
                                "qwen3-tiny --prompt-ids 5 --tp 2 --rank 2 --master-port 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rank 2"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace spark::engine
