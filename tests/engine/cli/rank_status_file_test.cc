// RankStatus: the JSON object a supervisor reads (exact keys and types), atomic replacement,
// progress only while loading, and a precise error for a path that cannot be written.
#include "engine/cli/rank_status_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

namespace spark::engine::cli {
namespace {

namespace fs = std::filesystem;

class RankStatusTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rank_status_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json ReadJson(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }

  fs::path dir_;
};

TEST_F(RankStatusTest, JsonHasExactlyTheDocumentedShape) {
  RankStatusRecord r;
  r.rank = 1;
  r.world_size = 4;
  r.pid = 4242;
  r.phase = RankPhase::kLoading;
  r.progress = 0.42;
  r.message = "reading \"weights\"";
  r.updated = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764454205123));
  r.steps = 12;
  r.tokens = 345;
  r.busy = true;
  r.progressed = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764454204000));
  r.memory_available_bytes = 1234567;
  r.memory_guard = "no-admit";
  const std::string text = RankStatusJson(r);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j.size(), 12u) << text;
  EXPECT_EQ(j.at("steps"), 12);
  EXPECT_EQ(j.at("tokens"), 345);
  EXPECT_EQ(j.at("busy"), true);
  EXPECT_EQ(j.at("progressed"), "2025-11-29T22:10:04.000Z");
  EXPECT_EQ(j.at("memory"), (nlohmann::json{{"available_bytes", 1234567}, {"guard", "no-admit"}}));
  EXPECT_EQ(j.at("rank"), 1);
  EXPECT_EQ(j.at("world_size"), 4);
  EXPECT_EQ(j.at("pid"), 4242);
  EXPECT_EQ(j.at("phase"), "loading");
  EXPECT_DOUBLE_EQ(j.at("progress").get<double>(), 0.42);
  EXPECT_EQ(j.at("message"), "reading \"weights\"");
  EXPECT_EQ(j.at("updated"), "2025-11-29T22:10:05.123Z");
}

TEST_F(RankStatusTest, PhaseNames) {
  const std::pair<RankPhase, const char*> cases[] = {
      {RankPhase::kStarting, "starting"}, {RankPhase::kConnecting, "connecting"},
      {RankPhase::kLoading, "loading"},   {RankPhase::kWarming, "warming"},
      {RankPhase::kReady, "ready"},       {RankPhase::kFailed, "failed"},
      {RankPhase::kStopped, "stopped"}};
  for (const auto& [phase, name] : cases) EXPECT_EQ(RankPhaseName(phase), name);
}

TEST_F(RankStatusTest, EachChangeReplacesTheFile) {
  const fs::path path = dir_ / "status.json";
  RankStatus status(2, 4, path.string());
  ASSERT_TRUE(status.Set(RankPhase::kStarting, "hello").ok());
  nlohmann::json j = ReadJson(path);
  EXPECT_EQ(j["phase"], "starting");
  EXPECT_EQ(j["rank"], 2);
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["pid"], getpid());
  EXPECT_EQ(j["progress"], 0.0);
  EXPECT_TRUE(std::regex_match(j["updated"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << j["updated"];

  ASSERT_TRUE(status.Set(RankPhase::kLoading, "reading").ok());
  status.SetProgress(0.5);
  j = ReadJson(path);
  EXPECT_EQ(j["phase"], "loading");
  EXPECT_DOUBLE_EQ(j["progress"].get<double>(), 0.5);
  status.SetProgress(0.503);  // Under 1% and within 250 ms: not rewritten.
  EXPECT_DOUBLE_EQ(ReadJson(path)["progress"].get<double>(), 0.5);
  status.SetProgress(1.0);  // Done is always written.
  EXPECT_DOUBLE_EQ(ReadJson(path)["progress"].get<double>(), 1.0);

  ASSERT_TRUE(status.Set(RankPhase::kReady, "serving").ok());
  j = ReadJson(path);
  EXPECT_EQ(j["phase"], "ready");
  EXPECT_EQ(j["message"], "serving");
  EXPECT_DOUBLE_EQ(j["progress"].get<double>(), 1.0);
  status.SetProgress(0.1);  // Not loading: ignored.
  EXPECT_DOUBLE_EQ(ReadJson(path)["progress"].get<double>(), 1.0);
  EXPECT_EQ(status.phase(), RankPhase::kReady);

  // Only the file itself is left: no temporaries.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "status.json");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(RankStatusTest, TouchRefreshesUpdatedOnlyWhileReadyAndAtMostOnceASecond) {
  const fs::path path = dir_ / "status.json";
  RankStatus status(1, 2, path.string());
  ASSERT_TRUE(status.Set(RankPhase::kLoading, "reading").ok());
  const std::string loading = ReadJson(path)["updated"];
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  status.Touch();  // Not ready: nothing to refresh.
  EXPECT_EQ(ReadJson(path)["updated"], loading);

  ASSERT_TRUE(status.Set(RankPhase::kReady, "running").ok());
  const std::string ready = ReadJson(path)["updated"];
  status.Touch();  // Within a second of the last write: not rewritten.
  EXPECT_EQ(ReadJson(path)["updated"], ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  status.Touch();
  nlohmann::json j = ReadJson(path);
  EXPECT_NE(j["updated"], ready);
  EXPECT_EQ(j["phase"], "ready");
  EXPECT_EQ(j["message"], "running");
}

// A step counts when it ends; the ticker rewrites the file while ready from its own thread, so a
// rank inside a long step still shows a fresh "updated", "busy" and its counters.
TEST_F(RankStatusTest, TickerWritesCountersWhileAStepRuns) {
  const fs::path path = dir_ / "status.json";
  RankStatus status(0, 1, path.string());
  ASSERT_TRUE(status.Set(RankPhase::kReady, "serving").ok());
  status.StepStarted(256);
  status.StepFinished();
  status.StepStarted(256);  // a long prefill chunk, still running
  int samples = 0;
  status.StartTicker(std::chrono::milliseconds(100), [&] {
    ++samples;
    status.SetMemory({.available_bytes = int64_t{7} << 30, .guard = "ok", .resident_bytes = 5});
  });
  const std::string before = ReadJson(path)["updated"];
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  nlohmann::json j = ReadJson(path);
  status.StopTicker();
  EXPECT_GE(samples, 2);
  EXPECT_NE(j["updated"], before);
  EXPECT_EQ(j["steps"], 1);
  EXPECT_EQ(j["tokens"], 512);
  EXPECT_EQ(j["busy"], true);
  EXPECT_EQ(j["memory"]["available_bytes"], int64_t{7} << 30);
  EXPECT_EQ(j["memory"]["guard"], "ok");
  EXPECT_EQ(j["memory"]["resident_bytes"], 5);
  EXPECT_FALSE(j["memory"].contains("peak_resident_bytes"));
  const std::string stopped = ReadJson(path)["updated"];
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(ReadJson(path)["updated"], stopped) << "no writes after StopTicker";
}

TEST_F(RankStatusTest, TickerWritesNothingBeforeReady) {
  const fs::path path = dir_ / "status.json";
  RankStatus status(0, 1, path.string());
  ASSERT_TRUE(status.Set(RankPhase::kLoading, "reading").ok());
  const std::string loading = ReadJson(path)["updated"];
  status.StartTicker(std::chrono::milliseconds(50), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ReadJson(path)["updated"], loading);
}

TEST_F(RankStatusTest, TickerSamplesMemoryAsSoonAsTheRankIsReady) {
  const fs::path path = dir_ / "status.json";
  RankStatus status(0, 1, path.string());
  ASSERT_TRUE(status.Set(RankPhase::kLoading, "reading").ok());
  // A period far longer than the test: only the sample at ready can write the guard.
  status.StartTicker(std::chrono::hours(1), [&status] {
    RankMemoryReport r;
    r.available_bytes = 123;
    r.guard = "ok";
    status.SetMemory(r);
  });
  ASSERT_TRUE(status.Set(RankPhase::kReady, "serving").ok());
  nlohmann::json j;
  for (int i = 0; i < 200 && !j.contains("memory"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    j = ReadJson(path);
  }
  ASSERT_TRUE(j.contains("memory")) << j.dump();
  EXPECT_EQ(j["memory"]["guard"], "ok");
  EXPECT_EQ(j["memory"]["available_bytes"], 123);
  status.StopTicker();
}

TEST_F(RankStatusTest, UnwritablePathIsNamed) {
  const std::string path = (dir_ / "missing" / "status.json").string();
  RankStatus status(0, 1, path);
  const Status s = status.Set(RankPhase::kStarting, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();
}

TEST_F(RankStatusTest, NoPathOnlyLogs) {
  RankStatus status(0, 1, "");
  EXPECT_TRUE(status.Set(RankPhase::kFailed, "boom").ok());
  EXPECT_EQ(status.record().message, "boom");
}

}  // namespace
}  // namespace spark::engine::cli
