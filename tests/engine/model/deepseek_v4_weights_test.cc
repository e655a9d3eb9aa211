// The DeepSeek-V4 weight loader: name mapping and precise errors for missing, mis-shaped and
// unexpected tensors, on copies of the tiny fixture rewritten by the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>

#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v4/weight_names.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/model_family.h"
#include "tests/engine/core/safetensors_writer.h"

namespace spark::engine::model::dsv4 {
namespace {

std::string FixtureDir() {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/deepseek-v4-tiny";
}

TEST(DeepseekV4WeightNamesTest, MapsReleasedNamesToTransformersNames) {
  const std::vector<std::string> wq = CandidateNames("layers.3.attn.wq_a.weight");
  EXPECT_EQ(wq[0], "layers.3.attn.wq_a.weight");
  EXPECT_EQ(wq[1], "model.layers.3.attn.wq_a.weight");
  EXPECT_EQ(wq.back(), "model.layers.3.self_attn.q_a_proj.weight");
  const std::vector<std::string> bias = CandidateNames("layers.0.ffn.gate.bias");
  EXPECT_EQ(bias.back(), "model.layers.0.mlp.gate.e_score_correction_bias");
  const std::vector<std::string> idx = CandidateNames("layers.2.attn.indexer.compressor.ape");
  EXPECT_EQ(idx.back(), "model.layers.2.self_attn.compressor.indexer.position_bias");
  EXPECT_EQ(CandidateNames("embed.weight").back(), "model.embed_tokens.weight");
  EXPECT_TRUE(IsIgnoredTensor("mtp.0.attn.wq_a.weight"));
  EXPECT_FALSE(IsIgnoredTensor("layers.0.attn.wq_a.weight"));
}

// Copies the fixture with each tensor passed through `edit` (which may rename, reshape or drop
// it by clearing the name) and returns the loader's result.
Result<Weights> LoadEdited(const std::string& tag,
                           const std::function<void(testing::RawTensor&)>& edit,
                           std::vector<testing::RawTensor> extra = {}) {
  auto config = model::LoadModelConfig(FixtureDir());
  EXPECT_TRUE(config.ok());
  auto source = TensorSource::Open(FixtureDir());
  EXPECT_TRUE(source.ok());
  std::vector<testing::RawTensor> tensors;
  for (const auto& [name, t] : (*source)->tensors()) {
    testing::RawTensor copy{name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}};
    edit(copy);
    if (!copy.name.empty()) tensors.push_back(std::move(copy));
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("spark_dsv4_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  testing::WriteSafetensors((dir / "model.safetensors").string(), tensors);
  auto edited = TensorSource::Open(dir.string());
  EXPECT_TRUE(edited.ok()) << edited.status().message();
  Result<Weights> w = LoadWeights(**edited, *config);
  std::filesystem::remove_all(dir);
  return w;
}

TEST(DeepseekV4WeightsTest, LoadsTheFixtureUnderReleasedNames) {
  auto w = LoadEdited("released", [](testing::RawTensor& t) {
    if (t.name.rfind("model.", 0) == 0) t.name = t.name.substr(6);
    if (t.name == "embed_tokens.weight") t.name = "embed.weight";
    if (t.name.rfind("hc_head.hc_", 0) == 0) t.name = "hc_head_" + t.name.substr(11);
    if (t.name.find(".attn.norm.weight") != std::string::npos) {
      t.name.replace(t.name.find(".attn.norm."), 11, ".attn.kv_norm.");
    }
  });
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->layers.size(), 4u);
  EXPECT_EQ(w->layers[0].tid2eid.size(), 128u * 2);
  EXPECT_EQ(w->layers[1].expert_gate_up.size(), 6u);
}

TEST(DeepseekV4WeightsTest, NamesAMissingTensorAndTheNamesTried) {
  auto w = LoadEdited("missing", [](testing::RawTensor& t) {
    if (t.name == "model.layers.2.attn.indexer.wq_b.weight") t.name.clear();
  });
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("'layers.2.attn.indexer.wq_b.weight' is missing"),
            std::string::npos)
      << w.status().message();
  EXPECT_NE(w.status().message().find("self_attn.compressor.indexer.q_b_proj.weight"),
            std::string::npos);
}

TEST(DeepseekV4WeightsTest, NamesAMisShapedTensorWithBothShapes) {
  auto w = LoadEdited("shape", [](testing::RawTensor& t) {
    if (t.name == "model.layers.1.attn.compressor.ape") t.shape = {4, 64};
  });
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("'model.layers.1.attn.compressor.ape' has shape [4, 64], "
                                      "config.json implies [8, 32]"),
            std::string::npos)
      << w.status().message();
}

TEST(DeepseekV4WeightsTest, NamesUnexpectedTensors) {
  auto w = LoadEdited("extra", [](testing::RawTensor&) {},
                      {{"model.layers.4.attn.wq_a.weight", "F32", {1}, testing::F32Bytes({0})},
                       {"mtp.0.attn.wq_a.weight", "F32", {1}, testing::F32Bytes({0})}});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("model.layers.4.attn.wq_a.weight"), std::string::npos)
      << w.status().message();
  EXPECT_EQ(w.status().message().find("mtp.0"), std::string::npos) << w.status().message();
}

TEST(DeepseekV4WeightsTest, RejectsAHashTableOutsideTheExperts) {
  auto w = LoadEdited("tid2eid", [](testing::RawTensor& t) {
    if (t.name == "model.layers.0.ffn.gate.tid2eid") t.bytes[8 * 5] = 9;
  });
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("expert id 9"), std::string::npos) << w.status().message();
}

TEST(DeepseekV4WeightsTest, ReportsEveryTensorsBytesOnceWhileLoading) {
  for (const std::string& dir : {FixtureDir(), FixtureDir() + "/fp8"}) {
    auto config = model::LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status().message();
    auto source = TensorSource::Open(dir);
    ASSERT_TRUE(source.ok()) << source.status().message();
    uint64_t read = 0;
    int calls = 0;
    auto w = LoadWeights(**source, *config, {}, MoeSharding::kByExpert, [&](uint64_t bytes) {
      read += bytes;
      ++calls;
    });
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ(read, (*source)->total_bytes()) << dir;
    EXPECT_EQ(calls, static_cast<int>((*source)->tensors().size())) << dir;
  }
}

TEST(DeepseekV4TensorSourceTest, ReadsReleasedDtypesThroughTheCoreReader) {
  auto source = TensorSource::Open(FixtureDir() + "/fp8");
  ASSERT_TRUE(source.ok()) << source.status().message();
  std::set<std::string> dtypes;
  for (const auto& [name, t] : (*source)->tensors()) {
    dtypes.insert(t.dtype);
    EXPECT_EQ(t.bytes.size(), static_cast<size_t>(t.element_size) *
                                  std::accumulate(t.shape.begin(), t.shape.end(), int64_t{1},
                                                  std::multiplies<int64_t>()))
        << name;
  }
  for (const char* d : {"F8_E4M3", "F8_E8M0", "I8", "BF16"}) {
    EXPECT_TRUE(dtypes.count(d)) << "the fp8 fixture has no " << d << " tensor";
  }
}

TEST(DeepseekV4TensorSourceTest, JoinsShardsOfAnIndex) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("spark_dsv4_shards_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  testing::WriteSafetensors((dir / "a.safetensors").string(),
                            {{"layers.0.ffn.gate.tid2eid", "I64", {1}, {3, 0, 0, 0, 0, 0, 0, 0}}});
  testing::WriteSafetensors((dir / "b.safetensors").string(),
                            {{"layers.0.attn.wq_a.scale", "F8_E8M0", {2}, {0x7F, 0x80}}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"layers.0.ffn.gate.tid2eid": "a.safetensors",)"
      << R"( "layers.0.attn.wq_a.scale": "b.safetensors"}})";
  auto source = TensorSource::Open(dir.string());
  ASSERT_TRUE(source.ok()) << source.status().message();
  const RawTensor* ids = (*source)->Find("layers.0.ffn.gate.tid2eid");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, "I64");
  EXPECT_EQ(ids->element_size, 8u);
  EXPECT_EQ(ids->bytes[0], 3);
  const RawTensor* scale = (*source)->Find("layers.0.attn.wq_a.scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->file, (dir / "b.safetensors").string());
  EXPECT_EQ((*source)->total_bytes(), 10u);
  // The same tensor in two shards.
  testing::WriteSafetensors((dir / "b.safetensors").string(),
                            {{"layers.0.ffn.gate.tid2eid", "I64", {1}, {3, 0, 0, 0, 0, 0, 0, 0}}});
  auto twice = TensorSource::Open(dir.string());
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(twice.status().message().find("two shards"), std::string::npos)
      << twice.status().message();
  std::filesystem::remove_all(dir);
}

TEST(DeepseekV4TensorSourceTest, RejectsMalformedFilesNamingTheTensor) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("spark_dsv4_malformed_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();
  // 4 bytes of data but the tensor claims 8.
  testing::WriteRawSafetensors(
      path, R"({"layers.0.attn.wq_a.scale":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      {0, 0, 0, 0});
  auto truncated = TensorSource::Open(dir.string());
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("layers.0.attn.wq_a.scale"), std::string::npos);
  testing::WriteRawSafetensors(path, R"({"x":{"dtype":"Q4","shape":[2],"data_offsets":[0,1]}})",
                               {0});
  auto dtype = TensorSource::Open(dir.string());
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dtype.status().message().find("unsupported dtype 'Q4'"), std::string::npos)
      << dtype.status().message();
  EXPECT_NE(dtype.status().message().find(path), std::string::npos) << dtype.status().message();
  testing::WriteRawSafetensors(path, R"({"x":{"dtype":"I8","shape":[2],"data_offsets":"no"}})",
                               {0, 0});
  EXPECT_EQ(TensorSource::Open(dir.string()).status().code(), StatusCode::kDataLoss);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spark::engine::model::dsv4
