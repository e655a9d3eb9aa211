// Qwen3 FP8 checkpoints (F8_E4M3 Linear weights with 128 x 128 block scales in
// "<name>_scale_inv", the layout Qwen3-FP8 ships): the loader dequantises every slice a rank
// reads with the scales of the blocks it came from. A one-layer model wide enough for several
// blocks per matrix is written here with a reference quantiser, loaded as rank 1 of 2 (row and
// column slices that start inside a block), and compared element by element with the
// dequantised values; a weight without its scales is refused naming both tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/core/block_quant.h"
#include "engine/core/checkpoint.h"
#include "engine/core/dtype.h"
#include "engine/core/model_config.h"
#include "engine/model/model_family.h"
#include "engine/model/qwen3/qwen3_weights.h"
#include "tests/engine/core/safetensors_writer.h"

namespace spark::engine::model {
namespace {

using qwen3::LoadQwen3Weights;
using qwen3::Qwen3LayerWeights;
using qwen3::Qwen3Weights;
using testing::RawTensor;

constexpr int64_t kHidden = 256, kInter = 384, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kVocab = 64,
                  kBlock = 128;

// Nearest E4M3 code of v (ties to the even code), by search over all finite codes.
uint8_t ToE4M3(float v) {
  uint8_t best = 0;
  float best_err = std::numeric_limits<float>::infinity();
  for (int code = 0; code < 256; ++code) {
    const float f = core::F8E4M3ToFloat(static_cast<uint8_t>(code));
    if (std::isnan(f)) continue;
    const float err = std::fabs(f - v);
    if (err < best_err || (err == best_err && (code & 1) == 0)) {
      best = static_cast<uint8_t>(code);
      best_err = err;
    }
  }
  return best;
}

// A quantised matrix and what the loader must produce from it.
struct Fp8Matrix {
  RawTensor weight, scale;
  std::vector<float> dequant;  // [rows, cols]
};

Fp8Matrix Quantise(const std::string& name, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(rows * cols);
  for (float& x : w) x = dist(rng);
  const int64_t br = core::ScaleBlocks(rows, kBlock), bc = core::ScaleBlocks(cols, kBlock);
  std::vector<float> scales(br * bc, 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float& s = scales[(i / kBlock) * bc + j / kBlock];
      s = std::max(s, std::fabs(w[i * cols + j]) / 448.0f);
    }
  Fp8Matrix m;
  m.weight = {name, "F8_E4M3", {rows, cols}, std::vector<uint8_t>(rows * cols)};
  m.dequant.resize(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float s = scales[(i / kBlock) * bc + j / kBlock];
      const uint8_t code = ToE4M3(w[i * cols + j] / s);
      m.weight.bytes[i * cols + j] = code;
      m.dequant[i * cols + j] = core::F8E4M3ToFloat(code) * s;
    }
  m.scale = {name + "_scale_inv", "F32", {br, bc}, testing::F32Bytes(scales)};
  return m;
}

class Qwen3Fp8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / "spark_qwen3_fp8";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << nlohmann::json{
        {"model_type", "qwen3"},
        {"architectures", {"Qwen3ForCausalLM"}},
        {"hidden_size", kHidden},
        {"intermediate_size", kInter},
        {"num_hidden_layers", 1},
        {"num_attention_heads", kHeads},
        {"num_key_value_heads", kKvHeads},
        {"head_dim", kHeadDim},
        {"vocab_size", kVocab},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 1e6},
        {"max_position_embeddings", 256},
        {"tie_word_embeddings", false},
        {"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}};
    std::mt19937 rng(7);
    const std::string p = "model.layers.0.";
    const std::vector<std::tuple<std::string, int64_t, int64_t>> matrices = {
        {p + "self_attn.q_proj.weight", kHeads * kHeadDim, kHidden},
        {p + "self_attn.k_proj.weight", kKvHeads * kHeadDim, kHidden},
        {p + "self_attn.v_proj.weight", kKvHeads * kHeadDim, kHidden},
        {p + "self_attn.o_proj.weight", kHidden, kHeads * kHeadDim},
        {p + "mlp.gate_proj.weight", kInter, kHidden},
        {p + "mlp.up_proj.weight", kInter, kHidden},
        {p + "mlp.down_proj.weight", kHidden, kInter}};
    for (const auto& [name, rows, cols] : matrices) {
      Fp8Matrix m = Quantise(name, rows, cols, rng);
      tensors_.push_back(m.weight);
      tensors_.push_back(m.scale);
      dequant_[name] = std::move(m.dequant);
    }
    auto plain = [&](const std::string& name, std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      tensors_.push_back({name, "F32", shape, testing::F32Bytes(std::vector<float>(n, 0.5f))});
    };
    plain("model.embed_tokens.weight", {kVocab, kHidden});
    plain("lm_head.weight", {kVocab, kHidden});
    plain("model.norm.weight", {kHidden});
    plain(p + "input_layernorm.weight", {kHidden});
    plain(p + "post_attention_layernorm.weight", {kHidden});
    plain(p + "self_attn.q_norm.weight", {kHeadDim});
    plain(p + "self_attn.k_norm.weight", {kHeadDim});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::vector<RawTensor>& tensors) {
    testing::WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  }
  Result<Qwen3Weights> LoadRank(int rank, int size, backend::Backend& backend) {
    SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, model::LoadModelConfig(dir_.string()));
    SPARK_ASSIGN_OR_RETURN(auto ckpt, core::Checkpoint::Open(dir_.string()));
    return LoadQwen3Weights(*ckpt, config, {rank, size}, MoeSharding::kInsideExperts,
                            backend::DType::kF32, backend);
  }
  // Rows [r0, r0 + nr) x cols [c0, c0 + nc) of the dequantised matrix `name` ([*, cols]).
  std::vector<float> Expected(const std::string& name, int64_t cols, int64_t r0, int64_t nr,
                              int64_t c0, int64_t nc) {
    std::vector<float> out;
    for (int64_t i = r0; i < r0 + nr; ++i)
      for (int64_t j = c0; j < c0 + nc; ++j) out.push_back(dequant_.at(name)[i * cols + j]);
    return out;
  }
  static std::vector<float> Values(const backend::Buffer& b) {
    return std::vector<float>(b.data(), b.data() + b.size());
  }

  std::filesystem::path dir_;
  std::vector<RawTensor> tensors_;
  std::map<std::string, std::vector<float>> dequant_;
};

TEST_F(Qwen3Fp8Test, SlicesAreDequantisedWithTheirOwnBlocks) {
  Write(tensors_);
  backend::cpu::CpuBackend backend(1);
  auto w = LoadRank(1, 2, backend);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const Qwen3LayerWeights& l = w->layers[0];
  const std::string p = "model.layers.0.";
  const int64_t q_rows = kHeads * kHeadDim / 2, inter = kInter / 2;  // this rank's half
  // Row slices (q starts at row 128: block row 1; gate/up at 192: inside block row 1).
  EXPECT_EQ(Values(l.q),
            Expected(p + "self_attn.q_proj.weight", kHidden, q_rows, q_rows, 0, kHidden));
  std::vector<float> gate_up =
      Expected(p + "mlp.gate_proj.weight", kHidden, inter, inter, 0, kHidden);
  const std::vector<float> up =
      Expected(p + "mlp.up_proj.weight", kHidden, inter, inter, 0, kHidden);
  gate_up.insert(gate_up.end(), up.begin(), up.end());
  EXPECT_EQ(Values(l.gate_up), gate_up);
  // Column slices (o from column 128, down from column 192).
  EXPECT_EQ(Values(l.o),
            Expected(p + "self_attn.o_proj.weight", kHeads * kHeadDim, 0, kHidden, q_rows, q_rows));
  EXPECT_EQ(Values(l.down), Expected(p + "mlp.down_proj.weight", kInter, 0, kHidden, inter, inter));
  // The scales matter: the raw fp8 values are far from the weights.
  EXPECT_NE(Values(l.down)[0], core::F8E4M3ToFloat(tensors_[12].bytes[inter]));
}

TEST_F(Qwen3Fp8Test, WeightWithoutScalesIsRefused) {
  std::vector<RawTensor> without;
  for (const RawTensor& t : tensors_) {
    if (t.name != "model.layers.0.mlp.down_proj.weight_scale_inv") without.push_back(t);
  }
  Write(without);
  backend::cpu::CpuBackend backend(1);
  auto w = LoadRank(0, 1, backend);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("model.layers.0.mlp.down_proj.weight_scale_inv"),
            std::string::npos)
      << w.status().message();
}

}  // namespace
}  // namespace spark::engine::model
