#include "engine/model/deepseek_v4/footprint.h"

#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {
namespace {

using core::AttentionType;
using core::MlpType;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// [rows, cols] in FP8 E4M3 with a UE8M0 byte per 128x128 block.
int64_t Fp8(int64_t rows, int64_t cols) {
  return rows * cols + CeilDiv(rows, 128) * CeilDiv(cols, 128);
}
// [rows, cols] packed e2m1 with an E8M0 byte per 32 inputs.
int64_t Fp4(int64_t rows, int64_t cols) { return rows * cols / 2 + rows * CeilDiv(cols, 32); }
int64_t Bf16(int64_t n) { return 2 * n; }
int64_t Fp32(int64_t n) { return 4 * n; }

// Compressor of `dim` channels: kv and gate [coff*dim, hidden], ape [ratio, coff*dim], norm.
int64_t Compressor(int64_t dim, int64_t coff, int64_t ratio, int64_t hidden) {
  return 2 * Bf16(coff * dim * hidden) + Bf16(ratio * coff * dim) + Bf16(dim);
}

int64_t LayerBytes(const core::ModelConfig& c, const core::LayerSpec& spec, const ShardRanges& r) {
  const auto& d = c.dsv4;
  const int64_t hidden = c.hidden_size, dim = c.head_dim, ql = d.q_lora_rank;
  const int64_t n = c.residual_streams, mix = n * (n + 2);
  int64_t b = 2 * (Fp32(mix * n * hidden) + Fp32(mix) + Fp32(3));  // hc_attn, hc_ffn
  b += 2 * Bf16(hidden);                                           // attn_norm, ffn_norm
  b += Fp8(ql, hidden) + Bf16(ql) + Fp8(r.heads.size * dim, ql);   // wq_a, q_norm, wq_b
  b += Fp8(dim, hidden) + Bf16(dim) + Fp32(r.heads.size);          // wkv, kv_norm, sinks
  b += Fp8(d.o_lora_rank, r.heads.size * dim);                     // wo_a (the rank's heads)
  b += Fp8(hidden, r.groups.size * d.o_lora_rank);                 // wo_b (the rank's groups)
  if (spec.attention == AttentionType::kCompressedSparse) {
    const int64_t ratio = d.compress_rate_csa, di = d.index_head_dim, hi = d.index_n_heads;
    b += Compressor(dim, 2, ratio, hidden) + Compressor(di, 2, ratio, hidden);
    b += Bf16(hi * di * ql) + Bf16(hi * hidden);  // indexer wq_b, weights_proj
  } else if (spec.attention == AttentionType::kHeavilyCompressed) {
    b += Compressor(dim, 1, d.compress_rate_hca, hidden);
  }
  const int64_t experts = c.moe.num_experts, channels = r.expert_channels.size;
  b += Bf16(experts * hidden);  // router
  b += spec.mlp == MlpType::kHashMoe ? 8 * int64_t{c.vocab_size} * c.moe.top_k
                                     : Bf16(experts);  // tid2eid or selection bias
  b += r.experts.size * (2 * Fp4(channels, hidden) + Fp4(hidden, channels));
  const int64_t shared = r.shared_channels.size;
  b += 2 * Fp8(shared, hidden) + Fp8(hidden, shared);
  return b;
}

}  // namespace

KvFootprint ServingKvFootprint(const core::ModelConfig& c, const ServingKvLayout& layout) {
  const auto& d = c.dsv4;
  const int64_t dim = c.head_dim, di = d.index_head_dim;
  KvFootprint f;
  for (const core::LayerSpec& spec : c.layers) {
    f.bytes_per_sequence += int64_t{d.sliding_window} * dim * layout.window_bytes;
    if (spec.attention == AttentionType::kCompressedSparse) {
      const int64_t ratio = d.compress_rate_csa;
      f.bytes_per_token += static_cast<double>((dim + di) * layout.compressed_bytes) / ratio;
      // Two windows of pending tokens (the overlap), kv and gate at twice the width.
      f.bytes_per_sequence += 2 * ratio * (2 * 2 * dim + 2 * 2 * di) * layout.pending_bytes;
    } else if (spec.attention == AttentionType::kHeavilyCompressed) {
      const int64_t ratio = d.compress_rate_hca;
      f.bytes_per_token += static_cast<double>(dim * layout.compressed_bytes) / ratio;
      f.bytes_per_sequence += ratio * 2 * dim * layout.pending_bytes;
    }
  }
  return f;
}

Result<int64_t> WeightBytesPerRank(const core::ModelConfig& c, const TpShard& shard,
                                   MoeSharding moe) {
  SPARK_ASSIGN_OR_RETURN(ShardRanges r, PlanShard(c, shard, moe));
  const int64_t hidden = c.hidden_size, n = c.residual_streams;
  int64_t bytes = Bf16(r.vocab.size * hidden) * (c.tie_word_embeddings ? 1 : 2);  // embed, head
  // final norm, hc_head fn / base / scale
  bytes += Bf16(hidden) + Fp32(n * n * hidden) + Fp32(n) + Fp32(1);
  for (const core::LayerSpec& spec : c.layers) bytes += LayerBytes(c, spec, r);
  return bytes;
}

}  // namespace spark::engine::model::dsv4
