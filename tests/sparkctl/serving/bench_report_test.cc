// bench serve's arithmetic and documents: percentiles, 95% intervals over rounds, the per-cell
// figures from raw samples, JSON round trip, the refusal to compare different deployments, the
// SVG, and the flag and URL parsers.
#include "sparkctl/serving/bench_report.h"

#include <gtest/gtest.h>

namespace spark::serving {
namespace {

TEST(BenchReportTest, PercentilesInterpolate) {
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({3, 1, 2}, 50), 2);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({0, 10}, 95), 9.5);
}

TEST(BenchReportTest, ConfidenceIntervalUsesStudentsT) {
  const Estimate one = MeanCi95({5});
  EXPECT_DOUBLE_EQ(one.mean, 5);
  EXPECT_DOUBLE_EQ(one.ci95, 0);
  // n = 3, mean 2, sd 1: t(0.975, 2) = 4.303, half-width 4.303 / sqrt(3).
  const Estimate e = MeanCi95({1, 2, 3});
  EXPECT_DOUBLE_EQ(e.mean, 2);
  EXPECT_NEAR(e.ci95, 4.303 / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(e.n, 3);
}

StreamSample Sample(double ttft, double decode, int prompt, int completion, double first_at) {
  StreamSample s;
  s.ok = true;
  s.ttft_s = ttft;
  s.decode_s = decode;
  s.e2e_s = ttft + decode;
  s.first_token_at = first_at;
  s.last_token_at = first_at + decode;
  s.prompt_tokens = prompt;
  s.completion_tokens = completion;
  s.token_events = completion;  // a token an event unless a test says otherwise
  return s;
}

BenchServeRun TwoRounds() {
  BenchServeRun run;
  run.identity.model = "m";
  run.identity.build = "abc";
  run.options.concurrency = {2};
  run.options.contexts = {1024};
  run.options.repeats = 2;
  BenchCell cell{1024, 2, "", {}};
  // Round 1: two streams of 11 tokens, decode windows 1 s and 2 s from t = 1 and t = 1.
  cell.rounds.push_back({Sample(1.0, 1.0, 1000, 11, 1.0), Sample(1.0, 2.0, 1000, 11, 1.0)});
  // Round 2: the same at half the speed.
  cell.rounds.push_back({Sample(2.0, 2.0, 1000, 11, 2.0), Sample(2.0, 4.0, 1000, 11, 2.0)});
  StreamSample failed;
  failed.error = "HTTP 500: boom";
  cell.rounds[1].push_back(failed);
  run.cells.push_back(cell);
  run.cells.push_back({32768, 2, "32768 + 128 tokens exceed the model's 4096", {}});
  return run;
}

TEST(BenchReportTest, TokensThatCameTogetherMarkTheDecodeRates) {
  BenchServeRun run = TwoRounds();
  const std::string plain = BenchTable(run, Summarize(run));
  EXPECT_EQ(plain.find('*'), std::string::npos) << plain;
  run.cells[0].rounds[0][1].token_events = 4;  // 11 tokens in 4 events
  const std::vector<CellSummary> s = Summarize(run);
  EXPECT_EQ(s[0].clumped_streams, 1);
  const std::string marked = BenchTable(run, s);
  EXPECT_NE(marked.find("±31.8*"), std::string::npos) << marked;
  EXPECT_NE(marked.find("* 1 of 4 streams got their tokens in fewer events than tokens"),
            std::string::npos)
      << marked;
  const Result<SavedRun> saved =
      ParseBenchJson(nlohmann::json::parse(BenchJson(run).dump()), "run.json");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  ASSERT_FALSE(saved->cells.empty());
  EXPECT_EQ(saved->cells[0].clumped_streams, 1);
}

TEST(BenchReportTest, SummaryFollowsTheProtocol) {
  const std::vector<CellSummary> s = Summarize(TwoRounds());
  ASSERT_EQ(s.size(), 2u);
  const CellSummary& c = s[0];
  EXPECT_EQ(c.streams, 4);
  EXPECT_EQ(c.errors, 1);
  EXPECT_EQ(c.first_error, "HTTP 500: boom");
  EXPECT_DOUBLE_EQ(c.ttft_p50, 1.5);
  // Per stream decode: round 1 mean(10/1, 10/2) = 7.5, round 2 mean(10/2, 10/4) = 3.75.
  EXPECT_DOUBLE_EQ(c.decode_tps.mean, (7.5 + 3.75) / 2);
  EXPECT_EQ(c.decode_tps.n, 2);
  // Aggregate: round 1 20 tokens over [1, 3] = 10; round 2 20 over [2, 6] = 5.
  EXPECT_DOUBLE_EQ(c.aggregate_tps.mean, 7.5);
  // Prefill: 1000 / 1 and 1000 / 2.
  EXPECT_DOUBLE_EQ(c.prefill_tps.mean, 750);
  EXPECT_EQ(s[1].skipped, "32768 + 128 tokens exceed the model's 4096");
}

TEST(BenchReportTest, JsonRoundTripAndComparison) {
  BenchServeRun run = TwoRounds();
  run.identity.cluster = "lab";
  run.identity.cluster_sha256 = "c1";
  run.identity.profile_sha256 = "p1";
  const nlohmann::json doc = BenchJson(run);
  EXPECT_EQ(doc["schema"], kBenchServeSchema);
  EXPECT_EQ(doc["cells"][0]["rounds"].size(), 2u);
  Result<SavedRun> saved = ParseBenchJson(doc, "a.json");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_DOUBLE_EQ(saved->cells[0].aggregate_tps.mean, 7.5);
  EXPECT_TRUE(CheckComparable(run.identity, saved->identity).ok());
  BenchIdentity other = run.identity;
  other.build = "def";
  other.profile_sha256 = "p2";
  const Status s = CheckComparable(other, saved->identity);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("profile differs (p2 vs p1)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("build differs (def vs abc)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("cluster differs"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseBenchJson(nlohmann::json{{"schema", "other/v1"}}, "b.json").ok());
  const std::string table = CompareTable(Summarize(run), *saved);
  EXPECT_NE(table.find("+0.0%"), std::string::npos) << table;
}

TEST(BenchReportTest, TableAndSvgShowEveryCell) {
  const BenchServeRun run = TwoRounds();
  const std::vector<CellSummary> s = Summarize(run);
  const std::string table = BenchTable(run, s);
  EXPECT_NE(table.find("1k"), std::string::npos) << table;
  EXPECT_NE(table.find("skipped: 32768 + 128"), std::string::npos) << table;
  EXPECT_NE(table.find("7.5 ±"), std::string::npos) << table;
  const std::string svg = BenchSvg(run, s);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("context 1k tokens"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<polyline"), std::string::npos) << svg;
}

TEST(BenchServeFlagsTest, SizesAndUrls) {
  Result<std::vector<int>> sizes = ParseSizes("1k, 32k,512", "--context");
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(*sizes, (std::vector<int>{1024, 32768, 512}));
  EXPECT_FALSE(ParseSizes("1k,x", "--context").ok());
  EXPECT_FALSE(ParseSizes("0", "--concurrency").ok());
  Result<Url> u = ParseUrl("http://10.0.0.1:8000/v1/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->base_path, "");
  u = ParseUrl("http://gw/llm");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->base_path, "/llm");
  u = ParseUrl("https://spark.lan/v1");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->host, "spark.lan");
  EXPECT_FALSE(ParseUrl("ftp://x").ok());
  EXPECT_FALSE(ParseUrl("http://x:99999").ok());
}

}  // namespace
}  // namespace spark::serving
