// DeepSeek-V4.1 loading: both config.json forms and the reference's derived defaults, the Engram
// hashing front end against the values the reference exported (engram.json: multipliers,
// primes, offsets, hash ids, numpy RNG internals, also at the released Flash sizes), and precise
// errors for missing, mis-shaped and unexpected tensors and short Engram tables.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v41/deepseek_v41_config.h"
#include "engine/model/deepseek_v41/engram_hash.h"
#include "engine/model/deepseek_v41/engram_token_map.h"
#include "engine/model/deepseek_v41/footprint.h"
#include "engine/model/deepseek_v41/weights.h"
#include "engine/model/model_family.h"
#include "tests/engine/core/safetensors_writer.h"

namespace spark::engine::model::dsv41 {
namespace {

using nlohmann::json;

std::string FixtureDir(const std::string& variant = "") {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/deepseek-v41-tiny" +
         (variant.empty() ? "" : "/" + variant);
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

Result<core::ModelConfig> Parse(const json& doc) {
  return ParseModelConfig(doc.dump(), "config.json");
}

TEST(DeepseekV41ConfigTest, FlatAndCompositeFormsAgree) {
  auto flat = LoadModelConfig(FixtureDir());
  ASSERT_TRUE(flat.ok()) << flat.status().message();
  auto composite = LoadModelConfig(FixtureDir("release"));
  ASSERT_TRUE(composite.ok()) << composite.status().message();
  for (const core::ModelConfig* c : {&*flat, &*composite}) {
    const core::DeepseekV41Settings& s = c->dsv41;
    EXPECT_EQ(c->model_type, "deepseek_v41");
    EXPECT_EQ(s.compress_ratios, (std::vector<int>{0, 2, 2, 1, 1}));  // 3 draft entries dropped
    EXPECT_EQ(s.kv_source_layer_ids, (std::vector<int>{1, 3}));
    EXPECT_EQ(s.index_source_layer_ids, (std::vector<int>{1, 3, 4}));
    EXPECT_EQ(s.candidate_source_layer_id, 3);
    EXPECT_EQ(s.engram_num_embeddings, (std::vector<int64_t>{304, 462}));
    EXPECT_EQ(s.engram_compressed_vocab_size, 98627);
    EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-20f);
    EXPECT_EQ(c->dsv4.rope_head_dim, 8);
    EXPECT_TRUE(c->dsv4.compress_yarn.enabled);
    EXPECT_EQ(c->dsv4.compress_yarn.original_max_position_embeddings, 256);
    EXPECT_EQ(c->residual_streams, 2);
    EXPECT_EQ(s.KvSourceOf(2), 1);
    EXPECT_EQ(s.IndexSourceOf(4), 4);
    EXPECT_EQ(s.KvSourceOf(0), -1);
  }
}

// Sources derived as DeepseekV41TextConfig derives them: the released schedule for 40 layers,
// else the first layer of each same-ratio run; index sources = KV sources; the candidate source
// the last KV source.
TEST(DeepseekV41ConfigTest, DerivesTheSourcesAsTheReference) {
  json doc = ReadJson(FixtureDir() + "/config.json");
  for (const char* k : {"kv_source_layer_ids", "index_source_layer_ids",
                        "candidate_source_layer_id", "engram_layer_ids", "engram_num_embeddings"}) {
    doc.erase(k);
  }
  auto c = Parse(doc);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dsv41.kv_source_layer_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(c->dsv41.index_source_layer_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(c->dsv41.candidate_source_layer_id, 3);
  doc.erase("compress_ratios");
  doc["num_hidden_layers"] = 40;
  c = Parse(doc);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dsv41.kv_source_layer_ids, (std::vector<int>{2, 8, 14, 20}));
  EXPECT_EQ(c->dsv41.index_source_layer_ids, (std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c->dsv41.candidate_source_layer_id, 20);
  EXPECT_EQ(c->dsv41.compress_ratios[1], 0);
  EXPECT_EQ(c->dsv41.compress_ratios[2], 2);
  EXPECT_EQ(c->dsv41.compress_ratios[39], 1);
  doc["num_hidden_layers"] = 7;  // scaled pattern: [0, 0, 2, 2, 2, 1, 1]
  c = Parse(doc);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dsv41.compress_ratios, (std::vector<int>{0, 0, 2, 2, 2, 1, 1}));
  EXPECT_EQ(c->dsv41.kv_source_layer_ids, (std::vector<int>{2, 5}));
}

TEST(DeepseekV41ConfigTest, NamesEveryBadKey) {
  json doc = ReadJson(FixtureDir() + "/config.json");
  doc["scoring_func"] = "softmax";
  doc["compress_ratios"] = {0, 2, 2, 1, 1, 0, 0, 0, 0};  // one more than 5 + 3 draft layers
  doc["engram_num_embeddings"] = {304};
  doc["index_source_layer_ids"] = {3, 4};  // layer 1 (a KV source) has no indexer
  doc["rope_parameters"]["compress"]["partial_rotary_factor"] = 0.5;  // 16, not 8, channels
  auto c = Parse(doc);
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  for (const char* key :
       {"scoring_func", "compress_ratios", "engram_num_embeddings", "kv_source_layer_ids"}) {
    EXPECT_NE(m.find(key), std::string::npos) << key << " in " << m;
  }
  json composite = ReadJson(FixtureDir("release") + "/config.json");
  composite["quantization_config"]["quant_method"] = "awq";
  c = Parse(composite);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("quantization_config.quant_method"), std::string::npos);
}

// The DSpark fields (docs/speculative.md) are read and checked, not dropped: both fixture forms,
// the reference's derived target layers and the draft MoE's "0 = the backbone's".
TEST(DeepseekV41ConfigTest, ReadsTheDsparkFields) {
  for (const std::string& variant : {std::string(), std::string("release")}) {
    auto c = LoadModelConfig(FixtureDir(variant));
    ASSERT_TRUE(c.ok()) << c.status().message();
    const core::DeepseekV41Settings& s = c->dsv41;
    EXPECT_EQ(s.num_nextn_predict_layers, 3) << variant;
    EXPECT_EQ(s.dspark_block_size, 5) << variant;
    EXPECT_EQ(s.dspark_noise_token_id, 127) << variant;
    EXPECT_EQ(s.dspark_markov_rank, 256) << variant;
    EXPECT_EQ(s.dspark_n_routed_experts, 128) << variant;
    EXPECT_EQ(s.dspark_num_experts_per_tok, 3) << variant;
    EXPECT_EQ(s.dspark_target_layer_ids, (std::vector<int>{0, 2, 4})) << variant;
    EXPECT_EQ(DescribeDspark(*c),
              "checkpoint has 3 DSpark draft layers (mtp.0..2: block 5, noise token 127, Markov "
              "rank 256, 128 experts top 3, reading backbone layers 0, 2, 4)");
  }
  json doc = ReadJson(FixtureDir() + "/config.json");
  doc.erase("dspark_target_layer_ids");  // derived: the last 3 layers that are not KV sources
  doc["kv_source_layer_ids"] = {1};
  doc["index_source_layer_ids"] = {1};
  doc["candidate_source_layer_id"] = 1;
  doc["compress_ratios"] = {0, 2, 2, 2, 2};
  doc["dspark_n_routed_experts"] = 0;
  doc["dspark_num_experts_per_tok"] = 0;
  doc["num_nextn_predict_layers"] = 1;
  auto c = Parse(doc);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dsv41.dspark_target_layer_ids, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(c->dsv41.dspark_n_routed_experts, 8);  // the backbone's
  EXPECT_EQ(c->dsv41.dspark_num_experts_per_tok, 2);
  EXPECT_EQ(DescribeDspark(*c).substr(0, 52),
            "checkpoint has 1 DSpark draft layer (mtp.0: block 5,");
  doc["num_nextn_predict_layers"] = 0;
  doc["dspark_noise_token_id"] = 1000;  // not checked without draft layers
  c = Parse(doc);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(DescribeDspark(*c),
            "checkpoint has no DSpark draft layers (num_nextn_predict_layers 0)");
}

TEST(DeepseekV41ConfigTest, NamesEveryBadDsparkKey) {
  json doc = ReadJson(FixtureDir() + "/config.json");
  doc["dspark_block_size"] = 0;
  doc["dspark_noise_token_id"] = 128;  // vocab_size is 128
  doc["dspark_markov_rank"] = -1;
  doc["dspark_num_experts_per_tok"] = 129;  // more than dspark_n_routed_experts
  doc["dspark_target_layer_ids"] = {2, 2, 5};
  auto c = Parse(doc);
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  for (const char* part :
       {"dspark_block_size: must be >= 1, got 0",
        "dspark_noise_token_id: = 128 must be a token id below vocab_size (128)",
        "dspark_markov_rank: must be >= 1, got -1",
        "dspark_num_experts_per_tok: = 129 must be in 1..128 (dspark_n_routed_experts)",
        "dspark_target_layer_ids: must be strictly increasing",
        "dspark_target_layer_ids: layer 5 is not a backbone layer (0..4)"}) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
  doc = ReadJson(FixtureDir() + "/config.json");
  doc["dspark_target_layer_ids"] = "last";
  c = Parse(doc);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("dspark_target_layer_ids"), std::string::npos);
  doc = ReadJson(FixtureDir() + "/config.json");
  doc["num_nextn_predict_layers"] = -1;
  c = Parse(doc);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_nextn_predict_layers: must be >= 0, got -1"),
            std::string::npos)
      << c.status().message();
}

TEST(DeepseekV41EngramTest, NumpyGeneratorMatchesNumpy) {
  const json flash = ReadJson(FixtureDir() + "/engram.json")["flash"];
  for (const auto& [layer, rng] : flash["rng"].items()) {
    const uint32_t seed = rng["seed"].get<uint32_t>();
    const Pcg64Probe p = ProbePcg64(seed, 4);
    const auto u128 = [](uint64_t hi, uint64_t lo) {
      std::string s;
      unsigned __int128 v = (static_cast<unsigned __int128>(hi) << 64) | lo;
      do {
        s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
        v /= 10;
      } while (v != 0);
      return s;
    };
    EXPECT_EQ(u128(p.state_hi, p.state_lo), rng["pcg64_state_after_seeding"].get<std::string>());
    EXPECT_EQ(u128(p.inc_hi, p.inc_lo), rng["pcg64_inc"].get<std::string>());
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(std::to_string(p.first[i]), rng["first_next64"][i].get<std::string>()) << layer;
    }
  }
}

// Multipliers, primes, offsets and the hash ids of every position of the fixture's sequences
// (tiny settings) and of a sample at the released Flash settings.
TEST(DeepseekV41EngramTest, HashesAsTheReference) {
  const json e = ReadJson(FixtureDir() + "/engram.json");
  for (const char* which : {"fixture", "flash"}) {
    const json& f = e[which];
    core::DeepseekV41Settings s;
    s.engram_layer_ids = f.contains("layer_ids") ? f["layer_ids"].get<std::vector<int>>()
                                                 : f["engram_layer_ids"].get<std::vector<int>>();
    s.engram_vocab_size = f.value("engram_vocab_size", int64_t{0});
    s.engram_max_ngram_size = f.value("max_ngram_size", f.value("engram_max_ngram_size", 0));
    s.engram_n_heads = f.value("n_heads", f.value("engram_n_heads", 0));
    s.engram_compressed_vocab_size = f["compressed_vocab_size"].get<int>();
    auto h = EngramHashing::Create(s, f["pad_id_compressed"].get<int64_t>());
    ASSERT_TRUE(h.ok()) << h.status().message();
    std::vector<std::vector<int64_t>> mult, primes, offsets;
    for (int l = 0; l < h->layers(); ++l) {
      mult.push_back(h->multipliers(l));
      offsets.push_back(h->offsets(l));
      std::vector<int64_t> flat;
      for (const auto& per : f["primes"][l]) {
        for (const auto& p : per) flat.push_back(p.get<int64_t>());
      }
      EXPECT_EQ(h->primes(l), flat) << which;
    }
    EXPECT_EQ(mult, f["multipliers"].get<decltype(mult)>()) << which;
    EXPECT_EQ(offsets, f["offsets"].get<decltype(offsets)>()) << which;
    std::vector<std::vector<int64_t>> sequences;  // compressed ids
    std::vector<json> expected;
    if (std::string(which) == "fixture") {
      const auto map = f["token_map_first_vocab_size"].get<std::vector<int64_t>>();
      for (const auto& c : f["cases"]) {
        std::vector<int64_t> ids;
        for (int id : c["ids"].get<std::vector<int>>()) ids.push_back(map[id]);
        sequences.push_back(ids);
        expected.push_back(c["hash_ids"]);
      }
    } else {
      sequences.push_back(f["sample_compressed_ids"].get<std::vector<int64_t>>());
      expected.push_back(f["sample_hash_ids"]);
    }
    for (size_t c = 0; c < sequences.size(); ++c) {
      const std::vector<int64_t>& ids = sequences[c];
      for (size_t p = 0; p < ids.size(); ++p) {
        std::vector<int64_t> back(h->max_ngram(), -1);
        for (int k = 0; k < h->max_ngram() && k <= static_cast<int>(p); ++k) back[k] = ids[p - k];
        for (int l = 0; l < h->layers(); ++l) {
          std::vector<int64_t> out(h->columns());
          h->Hash(l, back, out.data());
          ASSERT_EQ(out, expected[c][p][l].get<std::vector<int64_t>>())
              << which << " sequence " << c << " position " << p << " layer " << l;
        }
      }
    }
    for (int l = 0; l < h->layers(); ++l) {
      const int64_t rows =
          (f.contains("num_embeddings") ? f["num_embeddings"] : f["engram_num_embeddings"])[l];
      EXPECT_EQ(h->RowsNeeded(l), rows) << which;
    }
  }
}

// The compressed token map derived here from the real DeepSeek tokenizer equals the reference's
// (engram_token_map.txt, exported by the fixture script from build_compressed_token_map).
TEST(DeepseekV41EngramTest, DerivesTheTokenMapOfTheRealTokenizer) {
  const std::string tokenizer = SPARK_SOURCE_DIR "/../shared/data/tokenizers/deepseek_v3";
  if (!std::filesystem::exists(tokenizer + "/tokenizer.json")) GTEST_SKIP() << tokenizer;
  const int size =
      ReadJson(FixtureDir() + "/engram.json")["real_tokenizer"]["compressed_vocab_size"];
  auto derived = LoadCompressedTokenMap(tokenizer, size, 2);
  ASSERT_TRUE(derived.ok()) << derived.status().message();
  auto stored = LoadCompressedTokenMap(FixtureDir(), size, 2);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  ASSERT_EQ(derived->size(), stored->size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < stored->size(); ++i) {
    if ((*derived)[i] != (*stored)[i] && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "first at token " << first;
  // A config.json that names another size is refused with both sizes.
  auto wrong = LoadCompressedTokenMap(tokenizer, 99092, 2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("has 98627 ids but config.json's "
                                          "engram_compressed_vocab_size is 99092"),
            std::string::npos)
      << wrong.status().message();
}

// Copies the base fixture with each tensor passed through `edit` (which may rename, reshape or
// drop it by clearing the name) and returns the loader's status.
Status LoadEdited(const std::string& tag, const std::function<void(testing::RawTensor&)>& edit,
                  std::vector<testing::RawTensor> extra = {},
                  std::function<void(core::ModelConfig&)> edit_config = {}) {
  auto config = LoadModelConfig(FixtureDir());
  EXPECT_TRUE(config.ok());
  if (edit_config) edit_config(*config);
  auto source = dsv4::TensorSource::Open(FixtureDir());
  EXPECT_TRUE(source.ok());
  std::vector<testing::RawTensor> tensors;
  for (const auto& [name, t] : (*source)->tensors()) {
    testing::RawTensor copy{name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}};
    edit(copy);
    if (!copy.name.empty()) tensors.push_back(std::move(copy));
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("spark_dsv41_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  testing::WriteSafetensors((dir / "model.safetensors").string(), tensors);
  auto edited = dsv4::TensorSource::Open(dir.string());
  EXPECT_TRUE(edited.ok()) << edited.status().message();
  core::DeepseekV41Settings s = config->dsv41;
  auto hashing = EngramHashing::Create(s, 2);
  EXPECT_TRUE(hashing.ok());
  const Status status = LoadWeights(**edited, *config, &*hashing).status();
  std::filesystem::remove_all(dir);
  return status;
}

TEST(DeepseekV41WeightsTest, LoadsTheFixtureAndSkipsDraftAndVisionTensors) {
  const Status s = LoadEdited("ok", [](testing::RawTensor&) {},
                              {{"mtp.0.attn.wq_a.weight", "F32", {1}, testing::F32Bytes({0})},
                               {"vision.patch_embed.weight", "F32", {1}, testing::F32Bytes({0})},
                               {"aligner.proj.0.weight", "F32", {1}, testing::F32Bytes({0})},
                               {"image_newline", "F32", {1}, testing::F32Bytes({0})}});
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(DeepseekV41WeightsTest, NamesAMissingTensorAndTheNamesTried) {
  const Status s = LoadEdited("missing", [](testing::RawTensor& t) {
    if (t.name == "model.layers.3.attn.indexer.wk.weight") t.name.clear();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'layers.3.attn.indexer.wk.weight' is missing (also tried "
                             "model.layers.3.attn.indexer.wk.weight)"),
            std::string::npos)
      << s.message();
}

TEST(DeepseekV41WeightsTest, NamesAMisShapedTensorWithBothShapes) {
  const Status s = LoadEdited("shape", [](testing::RawTensor& t) {
    if (t.name == "model.layers.1.engram.wkv.weight") t.shape = {384, 192};
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'model.layers.1.engram.wkv.weight' has shape [384, 192], "
                             "config.json implies [192, 384]"),
            std::string::npos)
      << s.message();
}

TEST(DeepseekV41WeightsTest, NamesUnexpectedTensors) {
  const Status s = LoadEdited(
      "extra", [](testing::RawTensor&) {},
      {{"model.layers.2.attn.compressor.wkv.weight", "F32", {1}, testing::F32Bytes({0})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.layers.2.attn.compressor.wkv.weight"), std::string::npos)
      << s.message();
}

// A table must cover its prime buckets (the fixture's tables have exactly sum(primes) rows).
TEST(DeepseekV41WeightsTest, RefusesAnEngramTableShorterThanItsBuckets) {
  const Status s = LoadEdited(
      "short",
      [](testing::RawTensor& t) {
        for (const char* part : {"weight", "scale"}) {
          if (t.name != std::string("model.layers.2.engram.embed.") + part) continue;
          t.bytes.resize(t.bytes.size() / t.shape[0] * 400);
          t.shape[0] = 400;
        }
      },
      {}, [](core::ModelConfig& c) { c.dsv41.engram_num_embeddings[1] = 400; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has 400 rows but its prime buckets need 462"), std::string::npos)
      << s.message();
}

// DeepSeek-V4.1-Flash's text config: DeepseekV41TextConfig's defaults (the released model's
// values) with the released Engram layers and table sizes, in the composite form.
json FlashConfig() {
  json text = {{"vocab_size", 129280},
               {"hidden_size", 5120},
               {"num_hidden_layers", 40},
               {"num_attention_heads", 64},
               {"head_dim", 512},
               {"engram_layer_ids", {1, 14}},
               {"engram_num_embeddings", {384006168, 384016682}},
               {"rope_scaling",
                {{"rope_type", "yarn"},
                 {"factor", 16},
                 {"beta_fast", 32},
                 {"beta_slow", 1},
                 {"original_max_position_embeddings", 65536}}},
               {"eos_token_id", 1},
               {"tie_word_embeddings", false}};
  return {{"model_type", "deepseek_v41"},
          {"text_config", text},
          {"quantization_config", {{"quant_method", "fp8"}, {"fmt", "e4m3"}}}};
}

// The serving figures quoted in docs/models.md and the profiles, for the released config.
TEST(DeepseekV41FootprintTest, ReleasedFlashConfig) {
  auto c = Parse(FlashConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dsv41.kv_source_layer_ids, (std::vector<int>{2, 8, 14, 20}));
  auto one = ServingMemory(*c, {0, 1}, MoeSharding::kByExpert);
  ASSERT_TRUE(one.ok()) << one.status().message();
  // Per token: three ratio-2 sources and one ratio-1 source, each entry 256 + 32 B of FP4 and
  // scales plus a 64 + 4 B indexer key: 3 x 356 / 2 + 356.
  EXPECT_EQ(one->kv_bytes_per_token, 890);
  // Per sequence: 40 FP8 windows of 128 x (512 + 16) B, one pending token's fp32 kv and gate
  // (2 x 512 x 4 B) at each ratio-2 source, three int32 Engram look-back ids.
  EXPECT_EQ(one->kv_bytes_per_sequence, 40 * 128 * 528 + 3 * 4096 + 12);
  EXPECT_EQ(one->engram_table_bytes, (384006168LL + 384016682LL) * (256 + 8));
  const double gib = 1024.0 * 1024 * 1024;
  std::printf("V4.1-Flash: KV %lld B/token, %.2f MiB/sequence; Engram tables %.1f GiB\n",
              static_cast<long long>(one->kv_bytes_per_token),
              one->kv_bytes_per_sequence / 1048576.0, one->engram_table_bytes / gib);
  // The CPU reference's own per-token fp32 record (cache_layout.h), for comparison.
  auto held = FindModelFamily("deepseek_v41")->memory(*c, {});
  ASSERT_TRUE(held.ok());
  std::printf("V4.1-Flash CPU reference record: %lld B/token\n",
              static_cast<long long>(held->kv_bytes_per_token));
  // Each layer's record as wide as its fields: 35 window-only layers 512 floats, layer 0 its
  // window and Engram id, three ratio-2 sources 2176 (window, kv, gate, entry, index key), the
  // ratio-1 source 1152 (no kv or gate).
  EXPECT_EQ(held->kv_bytes_per_token, (35 * 512 + 513 + 3 * 2176 + 1152) * 4);
  int64_t previous = one->weight_bytes + 1;
  for (int tp : {1, 2, 4}) {
    auto f = ServingMemory(*c, {0, tp}, MoeSharding::kByExpert);
    ASSERT_TRUE(f.ok());
    EXPECT_LT(f->weight_bytes, previous);
    previous = f->weight_bytes;
    std::printf("V4.1-Flash weights per rank at TP=%d: %.1f GiB\n", tp, f->weight_bytes / gib);
  }
}

// Resident set size of this process in bytes (VmRSS).
int64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// Serving a checkpoint whose Engram tables (two F8_E4M3 tables of ~12M rows, 1.6 GB, stored as
// a sparse file so the test costs no disk) dwarf the rest of the model (2.4 MB): the tables are
// read by row through the mapping, so resident memory grows by the rows looked up only.
TEST(DeepseekV41EngramTest, ReadsTablesByRowNotWhole) {
  json config = ReadJson(FixtureDir() + "/config.json");
  config["engram_vocab_size"] = 2000000;
  auto parsed = Parse(config);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto hashing = EngramHashing::Create(parsed->dsv41, 2);
  ASSERT_TRUE(hashing.ok());
  config["engram_num_embeddings"] = {hashing->RowsNeeded(0), hashing->RowsNeeded(1)};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("spark_dsv41_big_engram_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  auto source = dsv4::TensorSource::Open(FixtureDir());
  ASSERT_TRUE(source.ok());
  std::vector<testing::RawTensor> small;
  json header = {{"__metadata__", {{"format", "pt"}}}}, weight_map = json::object();
  uint64_t offset = 0, table_bytes = 0;
  for (const auto& [name, t] : (*source)->tensors()) {
    const bool table = name.find(".engram.embed.") != std::string::npos;
    weight_map[name] = table ? "tables.safetensors" : "rest.safetensors";
    if (!table) {
      small.push_back({name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}});
      continue;
    }
    const int64_t rows = hashing->RowsNeeded(name.find("layers.1.") != std::string::npos ? 0 : 1);
    const bool scale = name.ends_with(".scale");
    const int64_t cols = scale ? 2 : 64;
    header[name] = {{"dtype", scale ? "F8_E8M0" : "F8_E4M3"},
                    {"shape", {rows, cols}},
                    {"data_offsets", {offset, offset + rows * cols}}};
    offset += rows * cols;
  }
  table_bytes = offset;
  testing::WriteSafetensors((dir / "rest.safetensors").string(), small);
  const std::string tables = (dir / "tables.safetensors").string();
  testing::WriteRawSafetensors(tables, header.dump(), {});
  std::filesystem::resize_file(tables, std::filesystem::file_size(tables) + table_bytes);
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();

  const int64_t before = ResidentBytes();
  backend::cpu::CpuBackend backend(1);
  ModelOptions options;
  options.tokenizer_dir = FixtureDir();
  auto model = LoadModel(dir.string(), backend, nullptr, options);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const int64_t loaded = ResidentBytes() - before;
  auto cache = PagedKvCache::Create(backend, (*model)->kv_cache_spec(), 32, 4);
  ASSERT_TRUE(cache.ok());
  const auto prompt = ReadJson(FixtureDir() + "/expected.json")["cases"][0]["prompt_ids"]
                          .get<std::vector<int32_t>>();
  ForwardBatch batch;
  std::vector<int32_t> table(16);
  for (int i = 0; i < 16; ++i) table[i] = i;
  batch.AddSequence(prompt, 0, table, 4);
  std::vector<float> logits;
  ASSERT_TRUE((*model)->Forward(batch, *cache, &logits).ok());
  const int64_t grown = ResidentBytes() - before;
  std::printf(
      "Engram tables %.0f MB on disk (sparse); rest of the model %.1f MB; resident memory "
      "grew by %.1f MB loading and %.1f MB in all after serving %zu tokens\n",
      table_bytes / 1e6, std::filesystem::file_size(dir / "rest.safetensors") / 1e6, loaded / 1e6,
      grown / 1e6, prompt.size());
  EXPECT_LT(grown, int64_t{32} << 20);
  model->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spark::engine::model::dsv41
