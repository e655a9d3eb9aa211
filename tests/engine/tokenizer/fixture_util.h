// Shared helpers of the tokenizer tests: where the fixtures and the real tokenizers live.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace spark::tokenizer::testing {

inline std::filesystem::path FixtureDir() {
  return std::filesystem::path(SPARK_SOURCE_DIR) / "tests" / "fixtures";
}

// The directory of a real tokenizer ("deepseek_v3", "qwen3") in the shared data folder.
inline std::filesystem::path RealTokenizerDir(const std::string& name) {
  return std::filesystem::path(SPARK_SHARED_DIR) / "data" / "tokenizers" / name;
}

inline nlohmann::ordered_json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::ordered_json::parse(text.str());
}

}  // namespace spark::tokenizer::testing
