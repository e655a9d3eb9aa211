// Serving memory of DeepSeek-V4 (footprint.h) on the released V4-Flash config.json (keys as
// published) and on the tiny fixture, against values worked out by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/deepseek_v4/footprint.h"
#include "engine/model/model_family.h"

namespace spark::engine::model::dsv4 {
namespace {

// DeepSeek-V4-Flash's config.json as released (legacy keys; compress_ratios has a trailing
// entry for the MTP layer).
nlohmann::json FlashConfig() {
  nlohmann::json ratios = {0, 0};
  for (int i = 0; i < 20; ++i) ratios.insert(ratios.end(), {4, 128});
  ratios.insert(ratios.end(), {4, 0});
  return {{"architectures", {"DeepseekV4ForCausalLM"}},
          {"model_type", "deepseek_v4"},
          {"attention_bias", false},
          {"bos_token_id", 0},
          {"eos_token_id", 1},
          {"hc_eps", 1e-6},
          {"hc_mult", 4},
          {"hc_sinkhorn_iters", 20},
          {"head_dim", 512},
          {"hidden_act", "silu"},
          {"hidden_size", 4096},
          {"index_head_dim", 128},
          {"index_n_heads", 64},
          {"index_topk", 512},
          {"max_position_embeddings", 1048576},
          {"moe_intermediate_size", 2048},
          {"n_routed_experts", 256},
          {"n_shared_experts", 1},
          {"norm_topk_prob", true},
          {"num_attention_heads", 64},
          {"num_experts_per_tok", 6},
          {"num_hidden_layers", 43},
          {"num_hash_layers", 3},
          {"num_key_value_heads", 1},
          {"num_nextn_predict_layers", 1},
          {"o_groups", 8},
          {"o_lora_rank", 1024},
          {"q_lora_rank", 1024},
          {"qk_rope_head_dim", 64},
          {"rms_norm_eps", 1e-6},
          {"rope_scaling",
           {{"beta_fast", 32},
            {"beta_slow", 1},
            {"factor", 16},
            {"original_max_position_embeddings", 65536},
            {"type", "yarn"}}},
          {"rope_theta", 10000},
          {"routed_scaling_factor", 1.5},
          {"scoring_func", "sqrtsoftplus"},
          {"sliding_window", 128},
          {"swiglu_limit", 10.0},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"vocab_size", 129280},
          {"compress_rope_theta", 160000},
          {"compress_ratios", ratios},
          {"quantization_config",
           {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}}}};
}

core::ModelConfig Flash() {
  auto c = model::ParseModelConfig(FlashConfig().dump(), "flash/config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : core::ModelConfig{};
}

TEST(DeepseekV4FootprintTest, FlashKvBytesPerTokenAndPerSequence) {
  const core::ModelConfig c = Flash();
  ASSERT_EQ(c.num_layers, 43);
  const KvFootprint f = ServingKvFootprint(c);
  // 21 CSA layers x (512 + 128) x 2 B / 4 + 20 HCA layers x 512 x 2 B / 128.
  EXPECT_DOUBLE_EQ(f.bytes_per_token, 21 * 320.0 + 20 * 8.0);
  // Window 43 x 128 x 512 x 2 B; CSA pending 21 x 8 x (2048 + 512) x 4 B; HCA 20 x 128 x 1024 x 4
  // B.
  EXPECT_EQ(f.bytes_per_sequence, 5636096 + 1720320 + 10485760);
  const KvFootprint fp8 = ServingKvFootprint(c, {1, 1, 4});
  EXPECT_DOUBLE_EQ(fp8.bytes_per_token, 3440.0);
  // The CPU reference's fp32 record, each layer as wide as its fields: 2 sliding layers (D in
  // K), 20 HCA (2D + 2D) and 21 CSA (1920 + 1792 floats).
  auto held = FindModelFamily("deepseek_v4")->memory(c, {});
  ASSERT_TRUE(held.ok()) << held.status().message();
  EXPECT_EQ(held->kv_bytes_per_token, (2 * 512 + 20 * 2048 + 21 * 3712) * 4);
}

TEST(DeepseekV4FootprintTest, FlashWeightsSplitIntoReplicatedAndSharded) {
  const core::ModelConfig c = Flash();
  int64_t bytes[5] = {};
  for (int tp : {1, 2, 4}) {
    auto b = WeightBytesPerRank(c, TpShard{0, tp}, MoeSharding::kByExpert);
    ASSERT_TRUE(b.ok()) << b.status().message();
    bytes[tp] = *b;
    auto inside = WeightBytesPerRank(c, TpShard{tp - 1, tp}, MoeSharding::kInsideExperts);
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(*inside, *b) << "tp " << tp << ": both MoE modes hold 1/tp of every expert byte";
  }
  // Per rank = replicated + sharded / tp, with every sharded dimension divisible by 4.
  EXPECT_EQ(bytes[1] - bytes[2], 2 * (bytes[2] - bytes[4]));
  const int64_t sharded = 2 * (bytes[1] - bytes[2]);
  // 43 layers x 256 experts x 3 x 2048 x 4096 e2m1 values at 17/32 byte each dominate.
  const int64_t experts = int64_t{43} * 256 * 3 * 2048 * 4096 / 32 * 17;
  EXPECT_GT(sharded, experts);
  EXPECT_LT(sharded, experts + (int64_t{8} << 30));
  EXPECT_LT(bytes[1] - sharded, int64_t{6} << 30) << "replicated part";
}

TEST(DeepseekV4FootprintTest, TinyFixtureByHand) {
  auto c = model::LoadModelConfig(std::string(SPARK_SOURCE_DIR) +
                                 "/tests/fixtures/models/deepseek-v4-tiny");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // Layers [sliding, HCA 8, CSA 4, CSA 4], head_dim 32, index_head_dim 16, window 8.
  const KvFootprint f = ServingKvFootprint(*c);
  EXPECT_DOUBLE_EQ(f.bytes_per_token, 32 * 2 / 8.0 + 2 * (48 * 2 / 4.0));
  EXPECT_EQ(f.bytes_per_sequence, 4 * 8 * 32 * 2 + 8 * 64 * 4 + 2 * (8 * (128 + 64) * 4));
  auto tp3 = WeightBytesPerRank(*c, TpShard{0, 3}, MoeSharding::kByExpert);
  ASSERT_FALSE(tp3.ok());
  EXPECT_EQ(tp3.status().code(), StatusCode::kInvalidArgument);
}

// Prints the per-rank figures quoted in profiles/deepseek-*.yaml and docs/models.md. V4.1-Flash
// is approximated with V4's layer structure at V4.1's published dimensions (hidden 5120, 40
// layers, q_lora 1280, 384 experts of 2304, 32 indexer heads), without the Engram tables and
// the draft layers.
TEST(DeepseekV4FootprintTest, PrintsServingFiguresPerRank) {
  nlohmann::json v41 = FlashConfig();
  v41["hidden_size"] = 5120;
  v41["num_hidden_layers"] = 40;
  v41["q_lora_rank"] = 1280;
  v41["n_routed_experts"] = 384;
  v41["moe_intermediate_size"] = 2304;
  v41["index_n_heads"] = 32;
  v41["compress_ratios"].erase(v41["compress_ratios"].begin() + 40, v41["compress_ratios"].end());
  auto v41_config = model::ParseModelConfig(v41.dump(), "v41/config.json");
  ASSERT_TRUE(v41_config.ok()) << v41_config.status().message();
  const std::pair<const char*, core::ModelConfig> models[] = {
      {"V4-Flash", Flash()}, {"V4.1-Flash (approx.)", *v41_config}};
  for (const auto& [name, c] : models) {
    if (c.hidden_size == 4096) {  // V4.1 caches FP4 entries from shared sources: not this layout
      const KvFootprint kv = ServingKvFootprint(c);
      std::printf("%s: KV %.0f B/token + %.2f MiB/sequence (bf16)\n", name, kv.bytes_per_token,
                  kv.bytes_per_sequence / 1048576.0);
    }
    for (int tp : {1, 2, 4}) {
      auto b = WeightBytesPerRank(c, TpShard{0, tp}, MoeSharding::kByExpert);
      ASSERT_TRUE(b.ok()) << b.status().message();
      std::printf("%s: TP=%d weights %.2f GiB per rank\n", name, tp, *b / 1073741824.0);
      EXPECT_GT(*b, 0);
    }
  }
}

}  // namespace
}  // namespace spark::engine::model::dsv4
