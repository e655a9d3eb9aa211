#include "sparkctl/up/logs.h"

#include <gtest/gtest.h>

#include "sparkctl/ssh/testing/fake_transport.h"
#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

TEST(LogsTest, InterleavesByTimeAndKeepsUntimedLinesWithTheirPredecessor) {
  std::map<int, std::string> text = {
      {0, "[2026-11-29 22:00:00.100] a0\n[2026-11-29 22:00:02.000] c0\n  continued\n"},
      {1, "[2026-11-29 22:00:01.000] b1\n[2026-11-29 22:00:02.000] c1\n"}};
  auto lines = Interleave(text);
  std::vector<std::string> got;
  for (const auto& l : lines) got.push_back(FormatLogLine(l));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "r0 | [2026-11-29 22:00:00.100] a0", "r1 | [2026-11-29 22:00:01.000] b1",
                     "r0 | [2026-11-29 22:00:02.000] c0", "r0 |   continued",
                     "r1 | [2026-11-29 22:00:02.000] c1"}));
  auto since = Interleave(text, *ParseLogTime("[2026-11-29 22:00:01.500]"));
  ASSERT_EQ(since.size(), 3u);
  EXPECT_EQ(since[0].text, "[2026-11-29 22:00:02.000] c0");
}

TEST(LogsTest, ParsesTimesAndSince) {
  auto t = ParseLogTime("[2026-11-29 22:00:00.250] [info] x");
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(*t - *ParseLogTime("[2026-11-29 22:00:00] y"), 0.25);
  EXPECT_FALSE(ParseLogTime("no time here"));
  EXPECT_DOUBLE_EQ(*ParseSince("90s", 1000), 910);
  EXPECT_DOUBLE_EQ(*ParseSince("10m", 1000), 400);
  EXPECT_DOUBLE_EQ(*ParseSince("2h", 10000), 2800);
  EXPECT_DOUBLE_EQ(*ParseSince("2026-11-29 22:00:00", 0), *ParseLogTime("[2026-11-29 22:00:00]"));
  EXPECT_DOUBLE_EQ(*ParseSince("2026-11-29T22:00:00", 0), *ParseLogTime("[2026-11-29 22:00:00]"));
  auto bad = ParseSince("yesterday", 0);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--since yesterday"), std::string::npos);
}

TEST(LogsTest, ReadsOnlyWhatWasAppendedSinceTheCursor) {
  ssh::testing::FakeTransport fake;
  auto plan = *PlanLaunch(testing::DemoProfile(), testing::Ring(), {});
  fake.OnCommand("spark-1", "[\\s\\S]*", [](const std::string&, const std::string& cmd)
                                              -> Result<ssh::CommandResult> {
    ssh::CommandResult r;
    r.exit_code = 0;
    // First read from offset 0, then from 10.
    r.stdout_data = cmd.find("tail -c +1 ") != std::string::npos ? "10\nfirst ten\n"
                                                                 : "15\nmore\n";
    return r;
  });
  LogCursor cursor;
  auto a = ReadLogs(fake, plan, 1, &cursor);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->at(1), "first ten\n");
  EXPECT_EQ(cursor.offsets[1], 10);
  auto b = ReadLogs(fake, plan, 1, &cursor);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->at(1), "more\n");
  EXPECT_EQ(cursor.offsets[1], 15);
  EXPECT_NE(fake.CommandsOn("spark-1").back().find("tail -c +11 "), std::string::npos);
  EXPECT_EQ(ReadLogs(fake, plan, 7, &cursor).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::up
