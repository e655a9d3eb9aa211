// PlanSync: who copies which file from whom, along the ring.
#include <gtest/gtest.h>

#include "sparkctl/weights/sync.h"

namespace spark::weights {
namespace {

const std::string kA(64, 'a');
const std::string kB(64, 'b');

Manifest TwoFiles() {
  return {.repository = "o/n", .revision = "r", .files = {{"a.bin", 100, kA}, {"b.bin", 7, kB}}};
}

// A cluster report where node i holds the files listed in good[i] (the others are missing).
ClusterVerifyReport Before(const std::vector<std::vector<std::string>>& good) {
  ClusterVerifyReport c{.dir = "/m"};
  for (size_t i = 0; i < good.size(); ++i) {
    NodeVerify n{.node = "spark-" + std::to_string(i)};
    for (const auto& e : TwoFiles().files) {
      bool ok = std::find(good[i].begin(), good[i].end(), e.path) != good[i].end();
      n.report.files.push_back({.path = e.path,
                                .state = ok ? FileState::kOk : FileState::kMissing});
    }
    c.nodes.push_back(n);
  }
  return c;
}

std::vector<std::string> Hops(const SyncPlan& p) {
  std::vector<std::string> out;
  for (const auto& t : p.transfers) out.push_back(t.file + ":" + t.from + "->" + t.to);
  return out;
}

TEST(SyncPlanTest, OnlyRankZeroHoldsTheFilesSoTheyWalkTheRing) {
  Result<SyncPlan> p = PlanSync(TwoFiles(), Before({{"a.bin", "b.bin"}, {}, {}, {}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Hops(*p), (std::vector<std::string>{
                          "a.bin:spark-0->spark-1", "a.bin:spark-1->spark-2",
                          "a.bin:spark-2->spark-3", "b.bin:spark-0->spark-1",
                          "b.bin:spark-1->spark-2", "b.bin:spark-2->spark-3"}));
  EXPECT_EQ(p->bytes_total, 3u * 107);
  EXPECT_EQ(p->bytes_in.at("spark-3"), 107u);
  EXPECT_EQ(p->bytes_in.count("spark-0"), 0u);
}

TEST(SyncPlanTest, ChainStartsAtTheHolderAndWrapsAround) {
  Result<SyncPlan> p = PlanSync(TwoFiles(), Before({{"b.bin"}, {"b.bin"}, {"a.bin", "b.bin"}, {}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Hops(*p), (std::vector<std::string>{"a.bin:spark-2->spark-3", "a.bin:spark-3->spark-0",
                                                "a.bin:spark-0->spark-1", "b.bin:spark-2->spark-3"}));
}

TEST(SyncPlanTest, NothingToDoWhenEveryNodeIsGood) {
  Result<SyncPlan> p = PlanSync(TwoFiles(), Before({{"a.bin", "b.bin"}, {"a.bin", "b.bin"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->transfers.empty());
}

TEST(SyncPlanTest, CorruptFileIsReplacedFromPredecessor) {
  ClusterVerifyReport before = Before({{"a.bin", "b.bin"}, {"a.bin", "b.bin"}});
  before.nodes[1].report.files[0].state = FileState::kHashMismatch;
  Result<SyncPlan> p = PlanSync(TwoFiles(), before);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Hops(*p), (std::vector<std::string>{"a.bin:spark-0->spark-1"}));
}

TEST(SyncPlanTest, FileNoNodeHoldsIsNamedWithTheFix) {
  Result<SyncPlan> p = PlanSync(TwoFiles(), Before({{"b.bin"}, {}}));
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("no node holds a verified copy of 1 file(s): a.bin"),
            std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("hf download o/n --revision r --local-dir /m"),
            std::string::npos);
}

TEST(SyncPlanTest, UnreachableNodeStopsThePlan) {
  ClusterVerifyReport before = Before({{"a.bin", "b.bin"}, {}});
  before.nodes[1].status = UnavailableError("spark-1: unreachable: refused");
  Result<SyncPlan> p = PlanSync(TwoFiles(), before);
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("spark-1: unreachable"), std::string::npos);
}

}  // namespace
}  // namespace spark::weights
