// config.json parsing for model_type deepseek_v4: the fixture's config, the legacy keys of the
// released checkpoints, and precise errors for what the engine does not implement.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/model/model_family.h"

namespace spark::engine::core {
namespace {

nlohmann::json FixtureJson() {
  std::ifstream in(std::string(SPARK_SOURCE_DIR) +
                   "/tests/fixtures/models/deepseek-v4-tiny/config.json");
  return nlohmann::json::parse(in);
}

Result<ModelConfig> Parse(const nlohmann::json& j) {
  return model::ParseModelConfig(j.dump(), "c.json");
}

TEST(DeepseekV4ConfigTest, ParsesTheTransformersConfig) {
  auto c = Parse(FixtureJson());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model_type, "deepseek_v4");
  EXPECT_EQ(c->residual_streams, 4);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->dsv4.rope_head_dim, 8);
  EXPECT_EQ(c->dsv4.compress_rate_csa, 4);
  EXPECT_EQ(c->dsv4.compress_rate_hca, 8);
  EXPECT_EQ(c->dsv4.sliding_window, 8);
  EXPECT_EQ(c->dsv4.index_topk, 3);
  EXPECT_FLOAT_EQ(c->dsv4.swiglu_limit, 0.5f);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->dsv4.compress_rope_theta, 160000.0);
  EXPECT_TRUE(c->dsv4.compress_yarn.enabled);
  EXPECT_DOUBLE_EQ(c->dsv4.compress_yarn.factor, 16.0);
  EXPECT_EQ(c->dsv4.compress_yarn.original_max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(c->dsv4.compress_yarn.attention_factor, 1.0);
  ASSERT_EQ(c->layers.size(), 4u);
  EXPECT_EQ(c->layers[0].attention, AttentionType::kSliding);
  EXPECT_EQ(c->layers[1].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c->layers[2].attention, AttentionType::kCompressedSparse);
  EXPECT_EQ(c->layers[0].mlp, MlpType::kHashMoe);
  EXPECT_EQ(c->layers[3].mlp, MlpType::kMoe);
}

// The released config.json spells the schedule as compress_ratios + num_hash_layers, the rope
// dims as qk_rope_head_dim and YaRN as a flat rope_scaling.
TEST(DeepseekV4ConfigTest, AcceptsTheReleasedLegacyKeys) {
  nlohmann::json j = FixtureJson();
  j.erase("layer_types");
  j.erase("mlp_layer_types");
  j.erase("partial_rotary_factor");
  j.erase("rope_parameters");
  j.erase("compress_rates");
  j["compress_ratios"] = {0, 128, 4, 4};
  j["num_hash_layers"] = 1;
  j["qk_rope_head_dim"] = 8;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", 16},
                       {"original_max_position_embeddings", 65536},
                       {"beta_fast", 32},
                       {"beta_slow", 1}};
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->layers[1].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c->dsv4.compress_rate_hca, 128);
  EXPECT_EQ(c->layers[0].mlp, MlpType::kHashMoe);
  EXPECT_EQ(c->layers[1].mlp, MlpType::kMoe);
  EXPECT_EQ(c->dsv4.rope_head_dim, 8);
  EXPECT_EQ(c->dsv4.compress_yarn.original_max_position_embeddings, 65536);
}

struct Refusal {
  const char* key;
  nlohmann::json value;
  const char* expected;  // must appear in the message
};

class DeepseekV4ConfigRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(DeepseekV4ConfigRefusalTest, NamesFileAndKey) {
  nlohmann::json j = FixtureJson();
  j[GetParam().key] = GetParam().value;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("c.json"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Keys, DeepseekV4ConfigRefusalTest,
    ::testing::Values(
        Refusal{"num_key_value_heads", 2, "num_key_value_heads: = 2"},
        Refusal{"scoring_func", "softmax", "scoring_func"},
        Refusal{"n_shared_experts", 2, "n_shared_experts"},
        Refusal{"layer_types", {"sliding_attention", "full_attention", "x", "y"}, "layer_types"},
        Refusal{"mlp_layer_types", {"moe"}, "mlp_layer_types"}, Refusal{"o_groups", 3, "o_groups"},
        Refusal{"partial_rotary_factor", 0.1, "partial_rotary_factor"},
        Refusal{
            "quantization_config", {{"quant_method", "gptq"}}, "quantization_config.quant_method"},
        Refusal{"q_lora_rank", nullptr, "q_lora_rank: missing"}));

TEST(DeepseekV4ConfigTest, RefusesAnUnknownCompressRope) {
  nlohmann::json j = FixtureJson();
  j["rope_parameters"]["compress"]["rope_type"] = "longrope";
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_parameters.compress.rope_type"), std::string::npos)
      << c.status().message();
}

// A wrongly-typed RoPE field is an error naming the file and the key, never a silent default.
struct RopeTypeCase {
  const char* pointer;  // JSON pointer into the fixture's config; "/rope_scaling..." drops
                        // rope_parameters first (the released spelling)
  nlohmann::json value;
  const char* expected;
};

class DeepseekV4RopeTypeTest : public ::testing::TestWithParam<RopeTypeCase> {};

TEST_P(DeepseekV4RopeTypeTest, NamesFileAndKey) {
  nlohmann::json j = FixtureJson();
  const std::string pointer = GetParam().pointer;
  if (pointer.rfind("/rope_scaling", 0) == 0) {
    j["rope_scaling"] = j["rope_parameters"]["compress"];
    j.erase("rope_parameters");
  }
  j[nlohmann::json::json_pointer(pointer)] = GetParam().value;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok()) << pointer;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("c.json"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, DeepseekV4RopeTypeTest,
    ::testing::Values(
        RopeTypeCase{"/rope_parameters/compress/rope_type", 4,
                     "rope_parameters.compress.rope_type: = 4 must be a string"},
        RopeTypeCase{"/rope_parameters/main/rope_type",
                     {"default"},
                     "rope_parameters.main.rope_type: = [\"default\"] must be a string"},
        RopeTypeCase{"/rope_parameters/compress/factor", "16",
                     "rope_parameters.compress.factor: = \"16\" must be a number"},
        RopeTypeCase{"/rope_parameters/compress/beta_fast", true,
                     "rope_parameters.compress.beta_fast: = true must be a number"},
        RopeTypeCase{"/rope_parameters/compress/original_max_position_embeddings", "256",
                     "rope_parameters.compress.original_max_position_embeddings: = \"256\""},
        RopeTypeCase{"/rope_parameters/compress/truncate", "yes",
                     "rope_parameters.compress.truncate: = \"yes\" must be true or false"},
        RopeTypeCase{"/rope_parameters/main/rope_theta", "1e4",
                     "rope_parameters.main.rope_theta: = \"1e4\" must be a number"},
        RopeTypeCase{"/rope_parameters/main", "default",
                     "rope_parameters.main: = \"default\" must be an object"},
        RopeTypeCase{"/rope_parameters/compress", 3,
                     "rope_parameters.compress: = 3 must be an object"},
        RopeTypeCase{"/rope_parameters", "yarn", "rope_parameters: = \"yarn\" must be an object"},
        RopeTypeCase{"/rope_scaling/rope_type", 2, "rope_scaling.rope_type: = 2 must be a string"},
        RopeTypeCase{"/rope_scaling/factor", nullptr, "rope_scaling.factor: missing"},
        RopeTypeCase{"/rope_scaling", 1.5, "rope_scaling: = 1.5 must be an object"}));

TEST(DeepseekV4ConfigTest, AcceptsTheLegacyTypeSpellingOfTheRopeType) {
  nlohmann::json j = FixtureJson();
  j["rope_scaling"] = j["rope_parameters"]["compress"];
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "yarn";
  j.erase("rope_parameters");
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->dsv4.compress_yarn.enabled);
  EXPECT_DOUBLE_EQ(c->dsv4.compress_yarn.factor, 16.0);
}

}  // namespace
}  // namespace spark::engine::core
