#include "engine/model/deepseek_v4/footprint.h"

#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {
namespace {

using core::AttentionType;
using core::MlpType;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of each kind of tensor in some storage: the released checkpoint's types, or what the
// CPU reference holds (fp32 for everything, int32 hash tables).
struct Storage {
  int64_t (*fp8)(int64_t rows, int64_t cols);  // FP8 dense matrices
  int64_t (*fp4)(int64_t rows, int64_t cols);  // routed experts
  int64_t (*bf16)(int64_t n);                  // small tensors
  int64_t (*fp32)(int64_t n);                  // mHC mixing, sinks
  int64_t (*hash)(int64_t n);                  // tid2eid entries
};

// [rows, cols] in FP8 E4M3 with a UE8M0 byte per 128x128 block.
int64_t Fp8(int64_t rows, int64_t cols) {
  return rows * cols + CeilDiv(rows, 128) * CeilDiv(cols, 128);
}
// [rows, cols] packed e2m1 with an E8M0 byte per 32 inputs.
int64_t Fp4(int64_t rows, int64_t cols) { return rows * cols / 2 + rows * CeilDiv(cols, 32); }
int64_t Bf16(int64_t n) { return 2 * n; }
int64_t Fp32(int64_t n) { return 4 * n; }
int64_t Fp32Matrix(int64_t rows, int64_t cols) { return 4 * rows * cols; }
int64_t I64(int64_t n) { return 8 * n; }

constexpr Storage kReleased = {Fp8, Fp4, Bf16, Fp32, I64};
constexpr Storage kHeld = {Fp32Matrix, Fp32Matrix, Fp32, Fp32, Fp32};

// Compressor of `dim` channels: kv and gate [coff*dim, hidden], ape [ratio, coff*dim], norm.
int64_t Compressor(const Storage& st, int64_t dim, int64_t coff, int64_t ratio, int64_t hidden) {
  return 2 * st.bf16(coff * dim * hidden) + st.bf16(ratio * coff * dim) + st.bf16(dim);
}

int64_t LayerBytes(const Storage& st, const core::ModelConfig& c, const core::LayerSpec& spec,
                   const ShardRanges& r) {
  const auto& d = c.dsv4;
  const int64_t hidden = c.hidden_size, dim = c.head_dim, ql = d.q_lora_rank;
  const int64_t n = c.residual_streams, mix = n * (n + 2);
  int64_t b = 2 * (st.fp32(mix * n * hidden) + st.fp32(mix) + st.fp32(3));  // hc_attn, hc_ffn
  b += 2 * st.bf16(hidden);                                           // attn_norm, ffn_norm
  b += st.fp8(ql, hidden) + st.bf16(ql) + st.fp8(r.heads.size * dim, ql);   // wq_a, q_norm, wq_b
  b += st.fp8(dim, hidden) + st.bf16(dim) + st.fp32(r.heads.size);          // wkv, kv_norm, sinks
  b += st.fp8(d.o_lora_rank, r.heads.size * dim);                     // wo_a (the rank's heads)
  b += st.fp8(hidden, r.groups.size * d.o_lora_rank);                 // wo_b (the rank's groups)
  if (spec.attention == AttentionType::kCompressedSparse) {
    const int64_t ratio = d.compress_rate_csa, di = d.index_head_dim, hi = d.index_n_heads;
    b += Compressor(st, dim, 2, ratio, hidden) + Compressor(st, di, 2, ratio, hidden);
    b += st.bf16(hi * di * ql) + st.bf16(hi * hidden);  // indexer wq_b, weights_proj
  } else if (spec.attention == AttentionType::kHeavilyCompressed) {
    b += Compressor(st, dim, 1, d.compress_rate_hca, hidden);
  }
  const int64_t experts = c.moe.num_experts, channels = r.expert_channels.size;
  b += st.bf16(experts * hidden);  // router
  b += spec.mlp == MlpType::kHashMoe ? st.hash(int64_t{c.vocab_size} * c.moe.top_k)
                                     : st.bf16(experts);  // tid2eid or selection bias
  b += r.experts.size * (2 * st.fp4(channels, hidden) + st.fp4(hidden, channels));
  const int64_t shared = r.shared_channels.size;
  b += 2 * st.fp8(shared, hidden) + st.fp8(hidden, shared);
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

namespace {

Result<int64_t> BytesPerRank(const Storage& st, const core::ModelConfig& c, const TpShard& shard,
                             MoeSharding moe) {
  SPARK_ASSIGN_OR_RETURN(ShardRanges r, PlanShard(c, shard, moe));
  const int64_t hidden = c.hidden_size, n = c.residual_streams;
  int64_t bytes = st.bf16(r.vocab.size * hidden) * (c.tie_word_embeddings ? 1 : 2);  // embed, head
  // final norm, hc_head fn / base / scale
  bytes += st.bf16(hidden) + st.fp32(n * n * hidden) + st.fp32(n) + st.fp32(1);
  for (const core::LayerSpec& spec : c.layers) bytes += LayerBytes(st, c, spec, r);
  return bytes;
}

}  // namespace

Result<int64_t> WeightBytesPerRank(const core::ModelConfig& c, const TpShard& shard,
                                   MoeSharding moe) {
  return BytesPerRank(kReleased, c, shard, moe);
}

Result<int64_t> HeldWeightBytesPerRank(const core::ModelConfig& c, const TpShard& shard,
                                       MoeSharding moe) {
  return BytesPerRank(kHeld, c, shard, moe);
}

}  // namespace spark::engine::model::dsv4
