#include "engine/model/deepseek_v41/footprint.h"

#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv41 {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// [rows, cols] FP8 E4M3 with a UE8M0 byte per 32x32 block.
int64_t Fp8(int64_t rows, int64_t cols) {
  return rows * cols + CeilDiv(rows, 32) * CeilDiv(cols, 32);
}
// [rows, cols] packed e2m1 with an E8M0 byte per 32 inputs.
int64_t Fp4(int64_t rows, int64_t cols) { return rows * cols / 2 + rows * CeilDiv(cols, 32); }
int64_t Bf16(int64_t n) { return 2 * n; }
int64_t Fp32(int64_t n) { return 4 * n; }

int64_t AttentionBytes(const core::ModelConfig& c, int i, const dsv4::ShardRanges& r) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, hd = c.head_dim, ql = d.q_lora_rank;
  const int64_t heads = r.heads.size, di = d.index_head_dim, ih = d.index_n_heads;
  int64_t b = Fp8(ql, hidden) + Bf16(ql) + Fp8(heads * hd, ql);  // wq_a, q_norm, wq_b
  b += Fp8(hd, hidden) + Bf16(hd) + Fp32(heads);                 // wkv, kv_norm, sinks
  b += Fp8(d.o_lora_rank, heads * hd) + Fp8(hidden, r.groups.size * d.o_lora_rank);  // wo_a, wo_b
  if (s.IsKvSource(i)) {
    b += Bf16(hd * hidden) * (s.compress_ratios[i] > 1 ? 2 : 1) + Bf16(hd);  // compressor
    b += Bf16(di * hd) + Bf16(di);                                           // indexer wk, k_norm
  }
  if (s.IsIndexSource(i)) b += Fp8(ih * di, ql) + Bf16(ih * hidden);
  return b;
}

int64_t LayerBytes(const core::ModelConfig& c, int i, const dsv4::ShardRanges& r) {
  const core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, n = c.residual_streams, mix = n * (n + 2);
  const int64_t e = c.moe.num_experts, ch = r.expert_channels.size, sh = r.shared_channels.size;
  int64_t b = 2 * Fp32(mix * n * hidden + mix + 3) + 2 * Bf16(hidden);  // mHC sites, norms
  b += AttentionBytes(c, i, r);
  b += Bf16(e * hidden) + 2 * Fp32(e);  // router, bias, bias_vl
  b += r.experts.size * (2 * Fp4(ch, hidden) + Fp4(hidden, ch));
  b += 2 * Fp8(sh, hidden) + Fp8(hidden, sh);
  if (s.EngramIndex(i) >= 0) {
    const int64_t cols = int64_t{s.engram_max_ngram_size - 1} * s.engram_n_heads;
    b += Fp8((n + 1) * hidden, cols * s.engram_head_dim) + 2 * Bf16(n * hidden);
  }
  return b;
}

}  // namespace

Result<ServingFootprint> ServingMemory(const core::ModelConfig& c, const TpShard& shard,
                                       MoeSharding moe) {
  SPARK_ASSIGN_OR_RETURN(dsv4::ShardRanges r, dsv4::PlanShard(c, shard, moe));
  const core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, hd = c.head_dim, di = c.dsv4.index_head_dim;
  ServingFootprint f;
  f.weight_bytes = Bf16(r.vocab.size * hidden) * (c.tie_word_embeddings ? 1 : 2) + Bf16(hidden);
  for (int i = 0; i < c.num_layers; ++i) f.weight_bytes += LayerBytes(c, i, r);
  for (int64_t rows : s.engram_num_embeddings) {
    f.engram_table_bytes += rows * s.engram_head_dim + rows * CeilDiv(s.engram_head_dim, 32);
  }
  const int64_t entry = hd / 2 + CeilDiv(hd, 16) + di / 2 + CeilDiv(di, 32);
  for (int src : s.kv_source_layer_ids) {
    const int64_t ratio = s.compress_ratios[src];
    f.kv_bytes_per_token += entry / ratio;
    f.kv_bytes_per_sequence += (ratio - 1) * Fp32(2 * hd);
  }
  f.kv_bytes_per_sequence += int64_t{c.num_layers} * c.dsv4.sliding_window * (hd + CeilDiv(hd, 32));
  if (!s.engram_layer_ids.empty()) f.kv_bytes_per_sequence += 4 * (s.engram_max_ngram_size - 1);
  return f;
}

}  // namespace spark::engine::model::dsv41
