// The collective sweep: exact sums and gathers over real Gloo ranks (the spark-bench binary, 4
// processes on loopback), the report's shape, and a backend that corrupts data being caught.
#include "sparkctl/bench/collective_rank.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/bench/launch.h"

namespace spark::bench {
namespace {

const std::string kProgram = SPARK_BINARY_DIR "/bin/spark-bench";

CollectiveOptions Small(Collective c) {
  CollectiveOptions o;
  o.collective = c;
  o.min_bytes = 8;
  o.max_bytes = 64 << 10;
  o.step_factor = 4;
  o.iters = 3;
  o.backend = "gloo";
  o.timeout = std::chrono::seconds(60);
  return o;
}

TEST(CollectiveRankTest, FourGlooRanksAllReduceExactly) {
  auto r = RunLocal(kProgram, Small(Collective::kAllReduce), 4, false, std::chrono::seconds(90),
                    false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  std::vector<std::string> rows;
  for (const std::string& line : Split(r->output, '\n', true))
    if (line[0] != '#') rows.push_back(line);
  ASSERT_EQ(rows.size(), 7u) << r->output;  // 8, 32, 128, 512, 2K, 8K, 32K
  // 32 bytes = 8 floats, sum, root -1, no wrong elements in either group.
  std::vector<std::string> w = Split(rows[1], ' ', true);
  ASSERT_EQ(w.size(), 13u) << rows[1];
  EXPECT_EQ(w[0], "32");
  EXPECT_EQ(w[1], "8");
  EXPECT_EQ(w[2], "float");
  EXPECT_EQ(w[3], "sum");
  EXPECT_EQ(w[4], "-1");
  EXPECT_EQ(w[8], "0");
  EXPECT_EQ(w[12], "0");
  EXPECT_NE(r->output.find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(r->output.find("#  Rank  3 Group  0"), std::string::npos);
}

TEST(CollectiveRankTest, ThreeGlooRanksAllGatherAsJson) {
  CollectiveOptions o = Small(Collective::kAllGather);
  o.json = true;
  auto r = RunLocal(kProgram, o, 3, false, std::chrono::seconds(90), false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto j = nlohmann::json::parse(r->output);
  EXPECT_EQ(j["schema"], "sparkctl-bench-collective/v1");
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_EQ(j["ranks"], 3);
  ASSERT_EQ(j["results"].size(), 7u);
  // 128 B: 32 floats / 3 = 10 -> 8 per rank (16-byte shares): 24 floats gathered = 96 B.
  EXPECT_EQ(j["results"][2]["size"], 96);
  EXPECT_EQ(j["results"][2]["count"], 8);
  EXPECT_EQ(j["results"][2]["redop"], "none");
  EXPECT_EQ(j["out_of_bounds"]["count"], 0);
}

TEST(CollectiveRankTest, RankWithoutRendezvousFails) {
  CollectiveOptions o = Small(Collective::kAllReduce);
  o.timeout = std::chrono::seconds(2);
  // Rank 1 of 2 runs alone against a rendezvous nobody serves.
  RankPlacement p{1, 2, "127.0.0.1", 1, 0, ""};
  EXPECT_EQ(RunCollectiveRank(o, p), 2);
}

// A one-rank backend whose all-reduce adds 1 to element 3: the check must count it.
class CorruptingBackend : public CollectiveBackend {
 public:
  std::string name() const override { return "fake"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status Allocate(size_t s, size_t r) override {
    send_.resize(s);
    recv_.resize(r);
    return Status::Ok();
  }
  float* send() override { return send_.data(); }
  float* recv() override { return recv_.data(); }
  Status Upload(const float* h, float* d, size_t n) override {
    std::memcpy(d, h, n * 4);
    return Status::Ok();
  }
  Status Download(const float* d, float* h, size_t n) override {
    std::memcpy(h, d, n * 4);
    return Status::Ok();
  }
  Status Start(Collective, const float* s, float* r, size_t n) override {
    std::memmove(r, s, n * 4);
    if (n > 3) r[3] += 1;
    return Status::Ok();
  }
  Status Wait() override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }

 private:
  std::vector<float> send_, recv_;
};

TEST(CollectiveRankTest, CorruptedResultsAreCountedAndFailTheFooter) {
  CorruptingBackend b;
  std::map<std::string, std::string> store;
  ReportChannel ch;
  ch.set = [&](const std::string& k, const std::string& v) {
    store[k] = v;
    return Status::Ok();
  };
  ch.get = [&](const std::string& k) -> Result<std::string> { return store.at(k); };
  CollectiveOptions o = Small(Collective::kAllReduce);
  o.min_bytes = 8;
  o.max_bytes = 64;
  o.step_factor = 2;
  std::FILE* out = std::tmpfile();
  auto wrong = RunSweep(o, b, ch, {}, 0, 0, out);
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  // 8 and 16 bytes have <= 4 floats... 8 B = 2, 16 B = 4 (element 3 exists), 32 B, 64 B:
  // three sizes x two groups, one wrong element each.
  EXPECT_EQ(*wrong, 6);
  std::rewind(out);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  EXPECT_NE(text.find("# Out of bounds values : 6 FAILED"), std::string::npos) << text;
}

TEST(CollectiveRankTest, ValuesSumExactlyInFloat) {
  // Element 5 of repetition 2 on ranks 0..3: (7+15+2)%61=24, (14+15+2)=31, (21+17)=38, 45.
  EXPECT_EQ(BenchValue(0, 5, 2), 24.f);
  EXPECT_EQ(BenchValue(1, 5, 2), 31.f);
  EXPECT_EQ(BenchValue(3, 5, 2), 45.f);
}

}  // namespace
}  // namespace spark::bench
