#include "bench/engine/deepseek_bench_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "engine/backend/backend_types.h"
#include "engine/model/deepseek_v41/dspark_weights.h"
#include "engine/model/model_family.h"

namespace spark::bench {
namespace {

using engine::backend::DType;
using engine::model::dsv4::Mat;
using engine::model::dsv4::Vec;
namespace dsv4 = engine::model::dsv4;
namespace dsv41 = engine::model::dsv41;

constexpr int64_t kBlock = 32;
int64_t Blocks(int64_t n) { return (n + kBlock - 1) / kBlock; }

// E4M3 codes of magnitude 0.25 .. 1.875 (exponent 5..7, no NaN), random sign.
uint8_t E4m3Code(uint8_t r) { return static_cast<uint8_t>((r & 0x87) | ((5 + (r >> 3) % 3) << 3)); }

// One random 64 MiB block (raw bytes, and the same as E4M3 codes), tiled over every tensor.
class Tiles {
 public:
  explicit Tiles(uint64_t seed) : raw_(size_t{64} << 20), e4m3_(raw_.size()) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < raw_.size(); i += 8) {
      const uint64_t v = rng();
      std::memcpy(raw_.data() + i, &v, 8);
    }
    for (size_t i = 0; i < raw_.size(); ++i) e4m3_[i] = E4m3Code(raw_[i]);
  }
  // `n` bytes of the block from `offset` on, wrapping around.
  std::vector<uint8_t> Bytes(size_t n, bool e4m3, size_t offset = 0) const {
    const std::vector<uint8_t>& src = e4m3 ? e4m3_ : raw_;
    std::vector<uint8_t> out(n);
    size_t done = 0, at = offset % src.size();
    while (done < n) {
      const size_t len = std::min(n - done, src.size() - at);
      std::memcpy(out.data() + done, src.data() + at, len);
      done += len;
      at = 0;
    }
    return out;
  }

 private:
  std::vector<uint8_t> raw_, e4m3_;
};

Mat Fp8(const Tiles& t, int64_t rows, int64_t cols, size_t salt) {
  Mat m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = DType::kE4M3B32;
  m.packed = t.Bytes(engine::backend::MatrixBytes(rows, cols, DType::kE4M3B32), true, salt);
  const size_t off = engine::backend::QuantScaleOffset(DType::kE4M3B32, rows, cols);
  std::fill(m.packed.begin() + off, m.packed.end(), uint8_t{120});  // 2^-7
  return m;
}

Mat Fp4(const Tiles& t, int64_t rows, int64_t cols, size_t salt) {
  Mat m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = DType::kE2M1B32;
  m.packed = t.Bytes(engine::backend::MatrixBytes(rows, cols, DType::kE2M1B32), false, salt);
  const size_t off = engine::backend::QuantScaleOffset(DType::kE2M1B32, rows, cols);
  std::fill(m.packed.begin() + off, m.packed.end(), uint8_t{119});  // 2^-8
  return m;
}

// Small random floats (|x| < scale), for the tensors the release keeps in bf16 or fp32.
Vec Floats(int64_t n, float scale, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> d(-scale, scale);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}
Vec Ones(int64_t n) { return Vec(static_cast<size_t>(n), 1.0f); }

Mat FloatMat(int64_t rows, int64_t cols, float scale, uint64_t seed) {
  return Mat::Floats(Floats(rows * cols, scale, seed), rows, cols);
}

// Bytes of a matrix as released.
double Fp8Bytes(double rows, double cols) { return rows * cols + Blocks(rows) * Blocks(cols); }
double Fp4Bytes(double rows, double cols) { return rows * cols / 2 + rows * Blocks(cols); }
double Bf16Bytes(double n) { return 2 * n; }

}  // namespace

std::vector<BenchLayer> BenchSchedule() {
  return {{0, false, false, false, false, "window only"},
          {2, true, true, false, true, "ratio 2 KV + index source, Engram"},
          {2, false, false, false, false, "ratio 2 reuser"},
          {1, true, true, true, false, "ratio 1 KV + index + candidate source"},
          {1, false, true, false, false, "ratio 1 reuser, own top-k"}};
}

std::vector<BenchLayer> FlashSchedule() {
  std::vector<BenchLayer> s;
  for (int i = 0; i < 40; ++i) {
    BenchLayer l;
    l.ratio = i < 2 ? 0 : i < 20 ? 2 : 1;
    l.kv_source = i == 2 || i == 8 || i == 14 || i == 20;
    l.index_source = l.kv_source || i == 26 || i == 32 || i == 36;
    l.candidate_source = i == 20;
    l.engram = i == 1 || i == 14;
    s.push_back(l);
  }
  return s;
}

Result<engine::core::ModelConfig> BenchConfig(int engram_vocab_size, int draft_layers) {
  const std::vector<BenchLayer> s = BenchSchedule();
  nlohmann::json ratios = nlohmann::json::array(), types = nlohmann::json::array();
  nlohmann::json kv = nlohmann::json::array(), index = nlohmann::json::array();
  nlohmann::json engram = nlohmann::json::array();
  int candidate = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    ratios.push_back(s[i].ratio);
    types.push_back(s[i].ratio == 0 ? "sliding_attention" : "shared_compressed_attention");
    if (s[i].kv_source) kv.push_back(i);
    if (s[i].index_source) index.push_back(i);
    if (s[i].engram) engram.push_back(i);
    if (s[i].candidate_source) candidate = static_cast<int>(i);
  }
  const nlohmann::json yarn = {{"attention_factor", 1.0}, {"beta_fast", 32},
                               {"beta_slow", 1},          {"factor", 16.0},
                               {"original_max_position_embeddings", 65536},
                               {"partial_rotary_factor", 0.125},
                               {"rope_theta", 160000.0},  {"rope_type", "yarn"}};
  nlohmann::json j = {
      {"model_type", "deepseek_v41_text"},
      {"vocab_size", 129280},
      {"hidden_size", 5120},
      {"num_hidden_layers", static_cast<int>(s.size())},
      {"num_attention_heads", 64},
      {"num_key_value_heads", 1},
      {"head_dim", 512},
      {"q_lora_rank", 1280},
      {"qk_rope_head_dim", 64},
      {"o_groups", 8},
      {"o_lora_rank", 1024},
      {"sliding_window", 128},
      {"compress_ratios", ratios},
      {"layer_types", types},
      {"kv_source_layer_ids", kv},
      {"index_source_layer_ids", index},
      {"candidate_source_layer_id", candidate},
      {"candidate_topk_blocks", 2048},
      {"candidate_block_size", 8},
      {"index_n_heads", 32},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"moe_intermediate_size", 2304},
      {"n_routed_experts", 384},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", 6},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"swiglu_limit", 10.0},
      {"gate_temp", 1.0},
      {"hc_mult", 4},
      {"hc_eps", 1e-6},
      {"hc_sinkhorn_iters", 20},
      {"rms_norm_eps", 1e-6},
      {"hidden_act", "silu"},
      {"max_position_embeddings", 1048576},
      {"tie_word_embeddings", false},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"rope_parameters",
       {{"main", {{"partial_rotary_factor", 0.125}, {"rope_theta", 10000.0},
                  {"rope_type", "default"}}},
        {"compress", yarn}}},
      {"rope_scaling", {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16.0},
                        {"original_max_position_embeddings", 65536}, {"rope_type", "yarn"}}},
      {"engram_layer_ids", engram},
      {"engram_vocab_size", engram_vocab_size},
      {"engram_num_embeddings", nlohmann::json::array({1})},  // set from the hashing below
      {"engram_max_ngram_size", 4},
      {"engram_n_heads", 8},
      {"engram_head_dim", 256},
      {"engram_pad_id", 2},
      {"engram_compressed_vocab_size", 99092},
      {"num_nextn_predict_layers", draft_layers}};
  return engine::model::ParseModelConfig(j.dump(), "deepseek-v41-flash-bench/config.json");
}

namespace {

// Layer `i`'s attention, mHC and MoE weights in the released types (its KV-source and
// index-source parts by `c`'s schedule); `salt` advances past the seeds used.
void LayerWeights(const engine::core::ModelConfig& c, int i, const Tiles& t, ThreadPool& pool,
                  size_t* salt, dsv4::LayerWeights* layer, dsv41::LayerExtras* x) {
  const int64_t hidden = c.hidden_size, hd = c.head_dim, heads = c.num_heads;
  const int64_t ql = c.dsv4.q_lora_rank, ol = c.dsv4.o_lora_rank, groups = c.dsv4.o_groups;
  const int64_t n = c.residual_streams, mix = (n + 2) * n, e = c.moe.num_experts;
  const int64_t inter = c.moe.intermediate_size, di = c.dsv4.index_head_dim;
  const int64_t ih = c.dsv4.index_n_heads;
  const engine::core::DeepseekV41Settings& s = c.dsv41;
  dsv4::LayerWeights& l = *layer;
  l.mlp = engine::core::MlpType::kMoe;
  for (dsv4::HyperConnectionWeights* hc : {&l.hc_attn, &l.hc_ffn}) {
    hc->fn = Floats(mix * n * hidden, 0.01f, 10 + i);
    hc->base = Floats(mix, 0.1f, 11 + i);
    hc->scale = Floats(3, 0.1f, 12 + i);
  }
  l.attn_norm = Ones(hidden);
  l.ffn_norm = Ones(hidden);
  l.q_norm = Ones(ql);
  l.kv_norm = Ones(hd);
  l.sinks = Floats(heads, 1.0f, 13 + i);
  l.wq_a = Fp8(t, ql, hidden, *salt += 7);
  l.wq_b = Fp8(t, heads * hd, ql, *salt += 7);
  l.wkv = Fp8(t, hd, hidden, *salt += 7);
  l.wo_a = Fp8(t, groups * ol, heads * hd / groups, *salt += 7);
  l.wo_b = Fp8(t, hidden, groups * ol, *salt += 7);
  if (i < c.num_layers && s.IsKvSource(i)) {
    l.compressor.wkv = FloatMat(hd, hidden, 0.02f, 14 + i);
    if (s.compress_ratios[i] > 1) l.compressor.wgate = FloatMat(hd, hidden, 0.02f, 15 + i);
    l.compressor.norm = Ones(hd);
    x->index_wk = FloatMat(di, hd, 0.05f, 16 + i);
    x->index_k_norm = Ones(di);
  }
  if (i < c.num_layers && s.IsIndexSource(i)) {
    l.index_wq_b = Fp8(t, ih * di, ql, *salt += 7);
    l.index_weights = FloatMat(ih, hidden, 0.02f, 17 + i);
  }
  l.router = FloatMat(e, hidden, 0.02f, 18 + i);
  l.router_bias = Floats(e, 0.01f, 19 + i);
  x->router_bias_vl = Floats(e, 0.01f, 20 + i);
  l.shared_gate_up = Fp8(t, 2 * inter, hidden, *salt += 7);
  l.shared_down = Fp8(t, hidden, inter, *salt += 7);
  l.expert_gate_up.resize(e);
  l.expert_down.resize(e);
  const size_t base = *salt;
  *salt += 14 * e;
  pool.ParallelFor(e, 4, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      l.expert_gate_up[k] = Fp4(t, 2 * inter, hidden, base + 14 * k);
      l.expert_down[k] = Fp4(t, hidden, inter, base + 14 * k + 7);
    }
  });
}

}  // namespace

Result<dsv41::Weights> BenchWeights(const engine::core::ModelConfig& c,
                                    const dsv41::EngramHashing& hashing, EngramTables* tables) {
  const Tiles t(41);
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const int64_t hidden = c.hidden_size, n = c.residual_streams;
  const engine::core::DeepseekV41Settings& s = c.dsv41;
  dsv41::Weights w;
  dsv4::Weights& b = w.base;
  b.types = dsv4::WeightTypes::For(DType::kFP8);
  SPARK_ASSIGN_OR_RETURN(b.ranges, dsv4::PlanShard(c, {}, engine::model::MoeSharding::kByExpert));
  b.embed = Floats(c.vocab_size * hidden, 0.05f, 1);
  b.head = FloatMat(c.vocab_size, hidden, 0.02f, 2);
  b.final_norm = Ones(hidden);
  b.layers.resize(c.num_layers);
  w.layers.resize(c.num_layers);
  size_t salt = 0;
  for (int i = 0; i < c.num_layers; ++i) {
    dsv41::LayerExtras& x = w.layers[i];
    b.layers[i].attention = c.layers[i].attention;
    LayerWeights(c, i, t, pool, &salt, &b.layers[i], &x);
    const int engram = s.EngramIndex(i);
    if (engram < 0) continue;
    x.engram = static_cast<int>(w.engram.size());
    dsv41::EngramWeights& g = w.engram.emplace_back();
    const int64_t cols = hashing.columns() * int64_t{s.engram_head_dim};
    g.wkv = Fp8(t, (n + 1) * hidden, cols, salt += 7);
    g.weight = Floats(n * hidden, 1.0f, 21 + i);
    // The table: E4M3 rows with UE8M0 scales per 32, in host memory standing in for the mapping.
    const int64_t rows = s.engram_num_embeddings[engram], dim = s.engram_head_dim;
    tables->bytes.push_back(t.Bytes(static_cast<size_t>(rows * dim), true));
    tables->bytes.push_back(std::vector<uint8_t>(static_cast<size_t>(rows * (dim / 32)), 120));
    dsv4::RawTensor weight, scale;
    weight.name = "layers." + std::to_string(i) + ".engram.embed.weight";
    weight.dtype = "F8_E4M3";
    weight.element_size = 1;
    weight.shape = {rows, dim};
    const auto& wb = tables->bytes[tables->bytes.size() - 2];
    weight.bytes = std::span<const uint8_t>(wb.data(), wb.size());
    scale.name = "layers." + std::to_string(i) + ".engram.embed.scale";
    scale.dtype = "F8_E8M0";
    scale.element_size = 1;
    scale.shape = {rows, dim / 32};
    scale.bytes = std::span<const uint8_t>(tables->bytes.back().data(), tables->bytes.back().size());
    tables->weight.push_back(weight);
    tables->scale.push_back(scale);
  }
  // The tables' RawTensors are stable now (no more push_back): point the weights at them.
  for (size_t k = 0; k < w.engram.size(); ++k) {
    const dsv4::RawTensor& wt = tables->weight[k];
    w.engram[k].table = dsv41::EngramTable(&wt, &tables->scale[k], engine::core::DType::kF8E4M3,
                                           wt.shape[0], static_cast<int>(wt.shape[1]));
  }
  return w;
}

StepBytes DecodeBytes(const engine::core::ModelConfig& c, const BenchLayer& layer, int batch,
                      int64_t context) {
  const double hidden = c.hidden_size, hd = c.head_dim, heads = c.num_heads;
  const double ql = c.dsv4.q_lora_rank, ol = c.dsv4.o_lora_rank, groups = c.dsv4.o_groups;
  const double n = c.residual_streams, mix = (n + 2) * n, e = c.moe.num_experts;
  const double inter = c.moe.intermediate_size, di = c.dsv4.index_head_dim;
  const double ih = c.dsv4.index_n_heads, k = c.moe.top_k;
  StepBytes b;
  b.sharded = Fp8Bytes(heads * hd, ql) + Fp8Bytes(groups * ol, heads * hd / groups) +
              Fp8Bytes(hidden, groups * ol) + 2 * Fp8Bytes(inter, hidden) +
              Fp8Bytes(hidden, inter);
  b.weights = b.sharded + Fp8Bytes(ql, hidden) + Fp8Bytes(hd, hidden);
  b.weights += Bf16Bytes(2 * hidden + ql + hd) + 4 * heads;  // norms, sinks
  b.weights += 2 * 4 * (mix * n * hidden + mix + 3);           // mHC sites (fp32)
  if (layer.kv_source) {
    b.weights += Bf16Bytes(hd * hidden) * (layer.ratio > 1 ? 2 : 1) + Bf16Bytes(hd);
    b.weights += Bf16Bytes(di * hd + di);
  }
  if (layer.index_source) b.weights += Fp8Bytes(ih * di, ql) + Bf16Bytes(ih * hidden);
  b.weights += Bf16Bytes(e * hidden) + 4 * e;  // router and bias
  const double distinct = e * (1 - std::pow(1 - k / e, batch));
  b.routed = distinct * (2 * Fp4Bytes(inter, hidden) + Fp4Bytes(hidden, inter));
  const double visible = layer.ratio > 0 ? static_cast<double>((context + 1) / layer.ratio) : 0;
  const double window = std::min<double>(static_cast<double>(context + 1), c.dsv4.sliding_window);
  double kv = window * (hd + hd / 32);                                     // FP8 + UE8M0 / 32
  kv += std::min<double>(visible, c.dsv4.index_topk) * (hd / 2 + hd / 16);  // FP4 + E4M3 / 16
  if (layer.index_source) kv += visible * (di / 2 + di / 32);               // FP4 keys
  b.kv = batch * kv;
  if (layer.engram) {
    const double cols = (c.dsv41.engram_max_ngram_size - 1) * c.dsv41.engram_n_heads;
    const double dim = c.dsv41.engram_head_dim;
    b.weights += Fp8Bytes((n + 1) * hidden, cols * dim) + Bf16Bytes(2 * n * hidden);
    b.engram_rows = batch * cols * (dim + dim / 32);
  }
  return b;
}

Result<dsv41::DraftWeights> BenchDraftWeights(const engine::core::ModelConfig& c) {
  const Tiles t(43);
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const engine::core::ModelConfig draft = dsv41::DraftConfig(c);
  const engine::core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size, rank = s.dspark_markov_rank;
  dsv41::DraftWeights w;
  w.stack.types = dsv4::WeightTypes::For(DType::kFP8);
  SPARK_ASSIGN_OR_RETURN(w.stack.ranges,
                         dsv4::PlanShard(draft, {}, engine::model::MoeSharding::kByExpert));
  w.stack.layers.resize(s.num_nextn_predict_layers);
  size_t salt = 1000;
  for (int j = 0; j < s.num_nextn_predict_layers; ++j) {
    dsv4::LayerWeights& l = w.stack.layers[j];
    l.attention = engine::core::AttentionType::kSliding;
    dsv41::LayerExtras unused;
    // Layer ids past the backbone's: window-only, no compressor, indexer or Engram.
    LayerWeights(draft, c.num_layers + j, t, pool, &salt, &l, &unused);
  }
  for (size_t k = 0; k < s.dspark_target_layer_ids.size(); ++k) {
    w.main_proj.push_back(Fp8(t, hidden, hidden, salt += 7));
  }
  w.main_norm = Ones(hidden);
  w.norm = Ones(hidden);
  w.markov_embed = Floats(vocab * rank, 0.05f, 31);
  w.markov_head = Floats(vocab * rank, 0.05f, 32);
  return w;
}

DraftBytes DsparkDraftBytes(const engine::core::ModelConfig& c, int blocks) {
  const engine::core::DeepseekV41Settings& s = c.dsv41;
  const int tokens = blocks * s.dspark_block_size;
  const engine::core::ModelConfig draft = engine::model::dsv41::DraftConfig(c);
  DraftBytes d;
  d.blocks = blocks;
  d.tokens = tokens;
  for (int j = 0; j < s.num_nextn_predict_layers; ++j) {
    // A window-only block; each token reads its window and its block's keys.
    const StepBytes b = DecodeBytes(draft, BenchLayer{}, tokens, c.dsv4.sliding_window);
    d.stack.weights += b.weights, d.stack.sharded += b.sharded, d.stack.routed += b.routed;
    d.stack.kv += b.kv;
  }
  d.head = HeadBytes(c, tokens);
  d.markov =
      s.dspark_block_size * Bf16Bytes(static_cast<double>(c.vocab_size) * s.dspark_markov_rank);
  const double targets = static_cast<double>(s.dspark_target_layer_ids.size());
  d.context_per_step = Fp8Bytes(c.hidden_size, targets * c.hidden_size) +
                       s.num_nextn_predict_layers * Fp8Bytes(c.head_dim, c.hidden_size);
  return d;
}

double HeadBytes(const engine::core::ModelConfig& c, int batch) {
  return Bf16Bytes(static_cast<double>(c.vocab_size) * c.hidden_size) + 4.0 * batch * c.hidden_size;
}

double PrefillFlops(const engine::core::ModelConfig& c, const BenchLayer& layer,
                    int64_t position) {
  const double hidden = c.hidden_size, hd = c.head_dim, heads = c.num_heads;
  const double ql = c.dsv4.q_lora_rank, ol = c.dsv4.o_lora_rank, groups = c.dsv4.o_groups;
  const double e = c.moe.num_experts, inter = c.moe.intermediate_size;
  const double di = c.dsv4.index_head_dim, ih = c.dsv4.index_n_heads, k = c.moe.top_k;
  double macs = ql * hidden + heads * hd * ql + hd * hidden + ol * heads * hd +
                hidden * groups * ol;                  // attention projections
  macs += e * hidden + (k + 1) * 3 * inter * hidden;  // router, routed and shared experts
  if (layer.kv_source) macs += hd * hidden * (layer.ratio > 1 ? 2 : 1) / layer.ratio + di * hd;
  if (layer.index_source) macs += ih * di * ql + ih * hidden;
  const double visible = layer.ratio > 0 ? static_cast<double>((position + 1) / layer.ratio) : 0;
  const double keys = std::min<double>(static_cast<double>(position + 1), c.dsv4.sliding_window) +
                      std::min<double>(visible, c.dsv4.index_topk);
  macs += 2 * heads * keys * hd;                        // q.k and p.v
  if (layer.index_source) macs += ih * visible * di;    // indexer scores
  if (layer.engram) {
    const double cols = (c.dsv41.engram_max_ngram_size - 1) * c.dsv41.engram_n_heads;
    macs += (c.residual_streams + 1) * hidden * cols * c.dsv41.engram_head_dim;
  }
  return 2 * macs;
}

}  // namespace spark::bench
