#include "engine/model/model_family.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace spark::engine::model {
namespace {

using core::LayerSpec;
using core::MlpType;

nlohmann::json Qwen3Json() {
  return {{"model_type", "qwen3"},
          {"vocab_size", 301},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"tie_word_embeddings", false},
          {"eos_token_id", 300},
          {"architectures", {"Qwen3ForCausalLM"}}};
}

nlohmann::json MoeJson() {
  nlohmann::json j = Qwen3Json();
  j["model_type"] = "qwen3_moe";
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["norm_topk_prob"] = true;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {1};
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000.0}};
  return j;
}

TEST(ModelConfigTest, ParsesQwen3) {
  auto c = ParseModelConfig(Qwen3Json().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->eos_token_ids, std::vector<int>{300});
  ASSERT_EQ(c->layers.size(), 3u);
  for (const LayerSpec& l : c->layers) EXPECT_EQ(l.mlp, MlpType::kDense);
}

TEST(ModelConfigTest, ParsesQwen3MoeLayerKindsAndRopeParameters) {
  auto c = ParseModelConfig(MoeJson().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->moe.num_experts, 8);
  EXPECT_EQ(c->moe.top_k, 2);
  EXPECT_TRUE(c->moe.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5000.0);
  EXPECT_EQ(c->layers[0].mlp, MlpType::kMoe);
  EXPECT_EQ(c->layers[1].mlp, MlpType::kDense);
  EXPECT_EQ(c->layers[2].mlp, MlpType::kMoe);
}

struct BadCase {
  const char* label;
  nlohmann::json doc;
  const char* expected;  // substring: the key and the problem
};

TEST(ModelConfigTest, RejectsUnsupportedTypesAndFieldsNamingFileAndKey) {
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = Qwen3Json();
    j[key] = std::move(v);
    return j;
  };
  nlohmann::json no_heads = Qwen3Json();
  no_heads.erase("num_attention_heads");
  const std::vector<BadCase> cases = {
      {"type", with("model_type", "llama"), "model_type: \"llama\" is not supported"},
      {"rope_scaling", with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}),
       "rope_scaling"},
      {"bias", with("attention_bias", true), "attention_bias"},
      {"sliding", with("use_sliding_window", true), "use_sliding_window"},
      {"act", with("hidden_act", "gelu"), "hidden_act"},
      {"missing", no_heads, "num_attention_heads: missing"},
      {"type_error", with("hidden_size", "64"), "hidden_size: must be an integer"},
      {"gqa", with("num_key_value_heads", 3), "num_key_value_heads: must divide"},
      {"layer_types",
       with("layer_types", {"full_attention", "sliding_attention", "full_attention"}),
       "layer_types[1]"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseModelConfig(c.doc.dump(), "/m/config.json");
    ASSERT_FALSE(r.ok()) << c.label;
    EXPECT_NE(r.status().message().find("/m/config.json"), std::string::npos) << c.label;
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << c.label << ": " << r.status().message();
  }
  EXPECT_FALSE(ParseModelConfig("{not json", "config.json").ok());
  nlohmann::json moe = MoeJson();
  moe["num_experts_per_tok"] = 9;
  EXPECT_NE(ParseModelConfig(moe.dump(), "c.json").status().message().find("num_experts_per_tok"),
            std::string::npos);
}

TEST(ModelConfigTest, LoadsFixtureDirectories) {
  for (const char* name : {"qwen3-tiny", "qwen3-moe-tiny"}) {
    auto c = LoadModelConfig(std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name);
    EXPECT_TRUE(c.ok()) << name << ": " << c.status().message();
  }
  EXPECT_EQ(LoadModelConfig("/nonexistent").status().code(), StatusCode::kNotFound);
}

TEST(ModelConfigTest, AddsStopTokensFromGenerationConfig) {
  const auto dir = std::filesystem::temp_directory_path() / "spark_model_config_gen";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << Qwen3Json().dump();
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [300, 7]})";
  auto c = LoadModelConfig(dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int>{300, 7}));
}

}  // namespace
}  // namespace spark::engine::model
