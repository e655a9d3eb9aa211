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

// A profile whose model.path holds a checkpoint on this machine is checked against what the
// engine makes of it: tp must divide its heads; without a local copy a note says what was not
// checked.
TEST(EngineCapabilitiesTest, CheckAsksTheEngineAboutALocalCheckpoint) {
  auto caps = QueryEngine(kEngine);
  ASSERT_TRUE(caps.ok()) << caps.status().message();
  const auto profile = [](const std::string& path, int nodes) {
    const std::string n = std::to_string(nodes);
    return "schema: sparkctl-profile/v1\nname: t\nmodel:\n  repository: o/m\n"
           "  revision: 0123456789abcdef\n  path: " + path + "\ntopology:\n  kind: ring\n"
           "  nodes: " + n + "\nengine:\n  backend: cpu\n  tp: " + n + "\n  kv_cache:\n"
           "    tokens: 1024\n";
  };
  const std::string tiny = std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/qwen3-tiny";
  // The tiny Qwen3 has 4 query and 2 KV heads: 3 ranks do not divide them.
  ProfileCheck three = CheckProfileText(profile(tiny, 3), "p.yaml", &*caps, true);
  ASSERT_EQ(three.problems.size(), 1u);
  EXPECT_EQ(three.problems[0].key, "engine.tp");
  EXPECT_EQ(three.problems[0].location.line, 12);
  EXPECT_NE(three.problems[0].message.find("num_attention_heads: 4 is not divisible by --tp 3"),
            std::string::npos)
      << three.problems[0].message;
  ProfileCheck four = CheckProfileText(profile(tiny, 4), "p.yaml", &*caps, true);
  EXPECT_TRUE(four.ok()) << four.problems[0].ToString();
  EXPECT_TRUE(four.notes.empty());
  ProfileCheck absent = CheckProfileText(profile("/nonexistent/model", 4), "p.yaml", &*caps, true);
  EXPECT_TRUE(absent.ok());
  ASSERT_EQ(absent.notes.size(), 1u);
  EXPECT_NE(absent.notes[0].find("/nonexistent/model/config.json is not on this machine"),
            std::string::npos)
      << absent.notes[0];
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
