// The real spark-engine's `info --json` read by sparkctl: the two agree on the schema, and every
// committed profile passes the engine checks of the build it ships with.
#include "sparkctl/profile/engine_capabilities.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "sparkctl/profile/profile_yaml.h"

namespace spark::profile {
namespace {

const std::string kEngine = std::string(SPARK_BINARY_DIR) + "/bin/spark-engine";

TEST(EngineCapabilitiesTest, ReadsTheBuiltEngine) {
  auto caps = QueryEngine(kEngine);
  ASSERT_TRUE(caps.ok()) << caps.status().message();
  std::vector<std::string> names;
  for (const EngineFamily& f : caps->families) names.push_back(f.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen3"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "deepseek_v4"), names.end());
  EXPECT_NE(std::find(caps->backends.begin(), caps->backends.end(), "cpu"), caps->backends.end());
  EXPECT_FALSE(caps->chat_formats.empty());
}

TEST(EngineCapabilitiesTest, CommittedProfilesPassTheEngineChecks) {
  auto caps = QueryEngine(kEngine);
  ASSERT_TRUE(caps.ok()) << caps.status().message();
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SPARK_SOURCE_DIR) + "/profiles")) {
    if (entry.path().extension() != ".yaml") continue;
    // The DeepSeek profiles ask for the cuda backend, which a build without CUDA lacks.
    const bool cuda = std::find(caps->backends.begin(), caps->backends.end(), "cuda") !=
                      caps->backends.end();
    auto p = LoadProfileFile(entry.path().string(), &*caps);
    if (!cuda && !p.ok() && p.status().message().find("engine.backend: 'cuda'") !=
                                std::string::npos) {
      continue;
    }
    EXPECT_TRUE(p.ok()) << entry.path() << ": " << p.status().message();
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST(EngineCapabilitiesTest, AMissingEngineIsNotFoundWithTheFix) {
  auto caps = QueryEngine("/nonexistent/spark-engine");
  ASSERT_FALSE(caps.ok());
  EXPECT_EQ(caps.status().code(), StatusCode::kNotFound);
  EXPECT_NE(caps.status().message().find("--engine"), std::string::npos)
      << caps.status().message();
}

}  // namespace
}  // namespace spark::profile
