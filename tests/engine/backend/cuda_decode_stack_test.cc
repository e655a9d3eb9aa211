// The persistent batch-1 decode kernel (CudaBackend::DecodeLayers, kernels/decode_stack.h)
// against the same Qwen3Model run op by op on the same backend: random bf16 weights, a bf16 KV
// cache behind a reversed block table, a prompt prefilled op by op, then decode steps over fixed
// tokens (so both runs see the same inputs). Shapes cover head_dim 64 and 128, 2-8 query heads
// per KV head, a q width other than hidden, weight rows shorter than a ring slot and rows of
// several slots, and contexts of 1 token up to 18 attention items of a KV head (the merge). The
// op-by-op run keeps fp32 attention (bf16_attention off), so the two differ by fp32 summation order
// only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/model_config.h"
#include "engine/model/kv_cache.h"
#include "engine/model/qwen3_model.h"
#include "engine/model/tp_shard.h"
#include "kernels/cuda_check.h"

namespace spark::engine::model {
namespace {

using backend::Buffer;
using backend::DType;
using backend::cuda::CudaBackend;

constexpr int kBlockSize = 16;

struct Shape {
  const char* name;
  int hidden, heads, kv_heads, head_dim, inter, layers;
};

core::ModelConfig Config(const Shape& s) {
  const std::string json =
      R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": )" +
      std::to_string(s.hidden) + R"(, "intermediate_size": )" + std::to_string(s.inter) +
      R"(, "num_hidden_layers": )" + std::to_string(s.layers) + R"(, "num_attention_heads": )" +
      std::to_string(s.heads) + R"(, "num_key_value_heads": )" + std::to_string(s.kv_heads) +
      R"(, "head_dim": )" + std::to_string(s.head_dim) +
      R"(, "vocab_size": 500, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
          "max_position_embeddings": 4096, "tie_word_embeddings": false})";
  auto c = core::ParseModelConfig(json, std::string(s.name) + "/config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

// Linear weights uniform with variance 1 / cols (activations stay near 1), norms in [0.5, 1.5].
Qwen3Weights RandomWeights(const core::ModelConfig& c, CudaBackend& b) {
  std::mt19937 rng(7);
  auto make = [&](int64_t rows, int64_t cols, DType dtype, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> host(rows * cols);
    for (float& x : host) x = dist(rng);
    auto buf = b.AllocateMatrix(rows, cols, dtype);
    EXPECT_TRUE(buf.ok()) << buf.status().message();
    b.UploadMatrix(host, cols, *buf);
    return std::move(*buf);
  };
  auto linear = [&](int64_t rows, int64_t cols) {
    const float a = std::sqrt(3.0f / cols);
    return make(rows, cols, DType::kBF16, -a, a);
  };
  const TpShard shard{0, 1};
  Qwen3Weights w;
  w.heads = shard.Heads(c);
  w.kv_heads = shard.KvHeads(c);
  w.vocab = shard.Vocab(c.vocab_size);
  w.dense_inter = c.intermediate_size;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const int64_t q = w.heads.size * hd, kv = w.kv_heads.size * hd, inter = w.dense_inter;
  w.embed = make(w.vocab.size, hidden, DType::kF32, -1.7f, 1.7f);
  w.lm_head = linear(w.vocab.size, hidden);
  w.final_norm = make(1, hidden, DType::kF32, 0.5f, 1.5f);
  for (int i = 0; i < c.num_layers; ++i) {
    Qwen3LayerWeights l;
    l.input_norm = make(1, hidden, DType::kF32, 0.5f, 1.5f);
    l.post_attention_norm = make(1, hidden, DType::kF32, 0.5f, 1.5f);
    l.qkv = linear(q + 2 * kv, hidden);
    l.SplitQkv(q, kv, hidden);
    l.q_norm = make(1, hd, DType::kF32, 0.5f, 1.5f);
    l.k_norm = make(1, hd, DType::kF32, 0.5f, 1.5f);
    l.o = linear(hidden, q);
    l.gate_up = linear(2 * inter, hidden);
    l.down = linear(hidden, inter);
    w.layers.push_back(std::move(l));
  }
  EXPECT_TRUE(b.Synchronize().ok()) << b.status().message();
  return w;
}

int32_t Token(int i, int vocab) { return static_cast<int32_t>((i * 7919 + 13) % vocab); }

struct DecodeRun {
  std::vector<std::vector<float>> logits;  // one row per decode step
  std::vector<int32_t> argmax;             // ForwardArgMax's ids (graph runs)
};

// Prefill `prompt` tokens (if any) op by op, then `steps` decode steps of the fixed tokens that
// follow. graphs: every step after the first in a CUDA graph, through ForwardArgMax.
DecodeRun Decode(Qwen3Model& m, CudaBackend& b, int vocab, int prompt, int steps, bool fused,
                 bool graphs = false) {
  const int blocks = (prompt + steps + kBlockSize - 1) / kBlockSize + 1;
  auto cache = PagedKvCache::Create(b, m.kv_cache_spec(), blocks, kBlockSize);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  std::vector<int32_t> table(blocks);
  for (int j = 0; j < blocks; ++j) table[j] = blocks - 1 - j;
  std::vector<int32_t> ids(prompt);
  for (int i = 0; i < prompt; ++i) ids[i] = Token(i, vocab);
  DecodeRun run;
  std::vector<float> logits;
  if (prompt > 0) {
    b.set_fused_decode(false);
    ForwardBatch first;
    first.AddSequence(ids, 0, table, kBlockSize);
    EXPECT_TRUE(m.Forward(first, *cache, &logits).ok());
  }
  b.set_fused_decode(fused);
  for (int s = 0; s < steps; ++s) {
    const int32_t id = Token(prompt + s, vocab);
    ForwardBatch step;
    step.AddSequence(std::span<const int32_t>(&id, 1), prompt + s, table, kBlockSize);
    if (graphs && s > 0) {
      EXPECT_TRUE(b.BeginGraph("decode-stack-test", blocks).ok());
      std::vector<int32_t> next;
      EXPECT_TRUE(m.ForwardArgMax(step, *cache, &next).ok()) << b.status().message();
      run.argmax.push_back(next.at(0));
    } else {
      Status st = m.Forward(step, *cache, &logits);
      EXPECT_TRUE(st.ok()) << st.message();
      run.logits.push_back(logits);
      run.argmax.push_back(
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
  }
  EXPECT_TRUE(b.Synchronize().ok()) << b.status().message();
  return run;
}

double MaxRelDiff(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, top = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    top = std::max(top, std::fabs(double{want[i]}));
    diff = std::max(diff, std::fabs(double{got[i]} - want[i]));
  }
  return diff / std::max(top, 1e-30);
}

struct Case {
  Shape shape;
  int prompt;
};

class DecodeStackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto b = CudaBackend::Create({});
    ASSERT_TRUE(b.ok()) << b.status().message();
    gpu_ = std::move(*b);
  }
  std::unique_ptr<CudaBackend> gpu_;
};

TEST_P(DecodeStackTest, MatchesTheLayersOpByOp) {
  const Case& c = GetParam();
  const core::ModelConfig config = Config(c.shape);
  ModelOptions options;
  options.weight_dtype = DType::kBF16;
  options.kv_dtype = DType::kBF16;
  Qwen3Model model(config, RandomWeights(config, *gpu_), *gpu_, nullptr, options);
  constexpr int kSteps = 3;
  const DecodeRun ops = Decode(model, *gpu_, config.vocab_size, c.prompt, kSteps, false);
  EXPECT_EQ(gpu_->decode_layers_taken(), 0);
  const DecodeRun fused = Decode(model, *gpu_, config.vocab_size, c.prompt, kSteps, true);
  ASSERT_EQ(gpu_->decode_layers_taken(), kSteps) << "the fused path did not take the steps";
  ASSERT_EQ(fused.logits.size(), ops.logits.size());
  double worst = 0;
  for (size_t s = 0; s < ops.logits.size(); ++s) {
    const double d = MaxRelDiff(fused.logits[s], ops.logits[s]);
    EXPECT_LT(d, 1e-4) << c.shape.name << " prompt " << c.prompt << " step " << s;
    worst = std::max(worst, d);
  }
  std::printf("%s, context %d-%d: max relative logit difference %.3g (fused vs op by op)\n",
              c.shape.name, c.prompt + 1, c.prompt + kSteps, worst);
  // The same steps in CUDA graphs (replays with the next step's context, slot and table).
  const DecodeRun graphs = Decode(model, *gpu_, config.vocab_size, c.prompt, kSteps, true, true);
  EXPECT_EQ(gpu_->decode_layers_taken(), 2 * kSteps) << "graph steps ran the layers op by op";
  EXPECT_EQ(graphs.argmax, fused.argmax);
  EXPECT_GE(gpu_->graph_count(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeStackTest,
                         ::testing::Values(Case{{"hd128-g4", 512, 8, 2, 128, 1536, 2}, 0},
                                           Case{{"hd128-g4", 512, 8, 2, 128, 1536, 2}, 300},
                                           Case{{"hd64-g2", 384, 6, 3, 64, 1000, 3}, 1100},
                                           Case{{"hd64-g8-q1024", 256, 16, 2, 64, 520, 2}, 40},
                                           // One Qwen3-8B layer: ~31 rows of every matrix per
                                           // block, down rows three ring slots long.
                                           Case{{"qwen3-8b-layer", 4096, 32, 8, 128, 12288, 1},
                                                200}));

}  // namespace
}  // namespace spark::engine::model
