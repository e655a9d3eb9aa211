// ServerMetrics' exposition against the Prometheus text format (0.0.4) and vLLM's naming: HELP
// and TYPE before each family's samples, counters named with `_total`, cumulative histogram
// buckets ending in +Inf equal to _count, label values escaped, numbers as Python writes them.
#include "engine/server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace spark::engine::server {
namespace {

struct Family {
  std::string type;
  bool help = false;
  std::vector<std::pair<std::string, std::string>> samples;  // name{labels}, value
};

// Parses the exposition, failing the test on any line the text format does not allow.
std::map<std::string, Family> ParseExposition(const std::string& text) {
  static const std::regex kSample(
      R"re(([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} (\S+))re");
  std::map<std::string, Family> families;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.starts_with("# HELP ")) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_FALSE(families[current].help) << "second HELP for " << current;
      families[current].help = true;
    } else if (line.starts_with("# TYPE ")) {
      const size_t sp = line.find(' ', 7);
      EXPECT_EQ(line.substr(7, sp - 7), current) << "TYPE without its HELP: " << line;
      families[current].type = line.substr(sp + 1);
    } else if (std::regex_match(line, m, kSample)) {
      const std::string name = m[1];
      const Family& f = families[current];
      const bool belongs =
          name == current ||
          (f.type == "histogram" &&
           (name == current + "_bucket" || name == current + "_sum" || name == current + "_count"));
      EXPECT_TRUE(belongs) << name << " outside its family " << current;
      families[current].samples.push_back({name + "{" + m[2].str() + "}", m[3]});
    } else {
      ADD_FAILURE() << "not a text-format line: '" << line << "'";
    }
  }
  return families;
}

std::string Value(const std::map<std::string, Family>& f, const std::string& family,
                  const std::string& sample) {
  auto it = f.find(family);
  if (it == f.end()) return "missing family " + family;
  for (const auto& [name, value] : it->second.samples) {
    if (name == sample) return value;
  }
  return "missing sample " + sample;
}

TEST(MetricsTest, ExpositionFollowsTheTextFormatWithVllmNames) {
  ServerMetrics m("qwen3", 4096);
  m.AddPromptTokens(10);
  m.AddGenerationTokens(3);
  m.ObserveTimeToFirstToken(0.03);
  m.ObserveInterTokenLatency(0.02);
  m.ObserveRequestDone({1.2, "tool_calls", 10, 3, 1, 100});
  const auto f = ParseExposition(m.Render({2, 1, 0.25f, 64, 16}));
  const std::map<std::string, std::string> types = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"vllm:prompt_tokens_total", "counter"},
      {"vllm:generation_tokens_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:e2e_request_latency_seconds", "histogram"},
      {"vllm:request_prompt_tokens", "histogram"},
      {"vllm:request_generation_tokens", "histogram"},
      {"vllm:request_params_n", "histogram"},
      {"vllm:request_params_max_tokens", "histogram"},
  };
  for (const auto& [name, type] : types) {
    ASSERT_TRUE(f.count(name)) << name;
    EXPECT_EQ(f.at(name).type, type) << name;
  }
  for (const auto& [name, family] : f) {
    EXPECT_TRUE(family.help) << name;
    if (family.type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
  }
  const std::string l = "model_name=\"qwen3\",engine=\"0\"";
  EXPECT_EQ(Value(f, "vllm:num_requests_running", "vllm:num_requests_running{" + l + "}"), "2.0");
  EXPECT_EQ(Value(f, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc{" + l + "}"), "0.25");
  EXPECT_EQ(Value(f, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits_total{" + l + "}"),
            "16.0");
  EXPECT_EQ(Value(f, "vllm:request_success_total",
                  "vllm:request_success_total{" + l + ",finished_reason=\"stop\"}"),
            "1.0");  // tool_calls counts as stop, as vLLM's finish reasons have no tool_calls
  EXPECT_EQ(Value(f, "vllm:request_success_total",
                  "vllm:request_success_total{" + l + ",finished_reason=\"length\"}"),
            "0.0");
  EXPECT_EQ(Value(f, "vllm:time_to_first_token_seconds",
                  "vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"0.04\"}"),
            "1.0");
  EXPECT_EQ(Value(f, "vllm:time_to_first_token_seconds",
                  "vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"0.02\"}"),
            "0.0");
  EXPECT_EQ(Value(f, "vllm:request_prompt_tokens",
                  "vllm:request_prompt_tokens_bucket{" + l + ",le=\"10.0\"}"),
            "1.0");
  EXPECT_EQ(Value(f, "vllm:request_params_max_tokens",
                  "vllm:request_params_max_tokens_bucket{" + l + ",le=\"2000.0\"}"),
            "1.0");
  EXPECT_EQ(Value(f, "vllm:e2e_request_latency_seconds",
                  "vllm:e2e_request_latency_seconds_sum{" + l + "}"),
            "1.2");
}

// Speculative decoding's counters under vLLM's names, and the mean accepted length.
TEST(MetricsTest, SpeculativeCountersUseVllmNames) {
  ServerMetrics m("qwen3", 4096);
  ServiceStats stats;
  stats.spec_drafts = 10;
  stats.spec_draft_tokens = 40;
  stats.spec_accepted_tokens = 15;
  stats.spec_accepted_per_pos = {8, 5, 2, 0};
  const auto f = ParseExposition(m.Render(stats));
  const std::string l = "{model_name=\"qwen3\",engine=\"0\"}";
  EXPECT_EQ(Value(f, "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts_total" + l),
            "10.0");
  EXPECT_EQ(Value(f, "vllm:spec_decode_num_draft_tokens_total",
                  "vllm:spec_decode_num_draft_tokens_total" + l),
            "40.0");
  EXPECT_EQ(Value(f, "vllm:spec_decode_num_accepted_tokens_total",
                  "vllm:spec_decode_num_accepted_tokens_total" + l),
            "15.0");
  EXPECT_EQ(Value(f, "spark:spec_decode_mean_accepted_length",
                  "spark:spec_decode_mean_accepted_length" + l),
            "2.5");
  const std::string pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
  const std::string lp = "{model_name=\"qwen3\",engine=\"0\",position=\"";
  EXPECT_EQ(Value(f, pos, pos + lp + "0\"}"), "8.0");
  EXPECT_EQ(Value(f, pos, pos + lp + "2\"}"), "2.0");
  EXPECT_EQ(Value(f, pos, pos + lp + "3\"}"), "0.0");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndEndAtCount) {
  ServerMetrics m("x", 1000);
  for (double v : {0.004, 0.3, 0.3, 9.0, 5000.0}) m.ObserveTimeToFirstToken(v);
  const auto f = ParseExposition(m.Render({}));
  const Family& h = f.at("vllm:time_to_first_token_seconds");
  double last_le = -1, last_count = 0;
  std::string inf, count;
  for (const auto& [name, value] : h.samples) {
    if (name.starts_with("vllm:time_to_first_token_seconds_bucket")) {
      const size_t le = name.find("le=\"") + 4;
      const std::string bound = name.substr(le, name.find('"', le) - le);
      EXPECT_GE(std::stod(value), last_count) << name;
      last_count = std::stod(value);
      if (bound == "+Inf") {
        inf = value;
      } else {
        EXPECT_GT(std::stod(bound), last_le) << name;
        last_le = std::stod(bound);
      }
    } else if (name.starts_with("vllm:time_to_first_token_seconds_count")) {
      count = value;
    }
  }
  EXPECT_EQ(inf, "5.0");
  EXPECT_EQ(count, "5.0");
  EXPECT_EQ(last_le, 2560.0);  // vLLM's last TTFT bound
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  ServerMetrics m("we\"ird\\model\nname", 16);
  const std::string text = m.Render({});
  EXPECT_NE(text.find("model_name=\"we\\\"ird\\\\model\\nname\""), std::string::npos) << text;
  ParseExposition(text);  // Still one sample per line, every line valid.
  EXPECT_EQ(EscapeLabelValue("a\"b"), "a\\\"b");
}

TEST(MetricsTest, NumbersAsPythonWritesThem) {
  EXPECT_EQ(PrometheusNumber(1), "1.0");
  EXPECT_EQ(PrometheusNumber(0.1), "0.1");
  EXPECT_EQ(PrometheusNumber(0.075), "0.075");
  EXPECT_EQ(PrometheusNumber(2560), "2560.0");
  EXPECT_EQ(PrometheusNumber(1.0 / 0.0), "+Inf");
  EXPECT_EQ(OneTwoFiveBuckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
}

}  // namespace
}  // namespace spark::engine::server
