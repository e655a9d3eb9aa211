#include "engine/model/deepseek_v4/weights.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/field_errors.h"
#include "engine/core/block_quant.h"
#include "engine/core/dtype.h"
#include "engine/model/deepseek_v4/tensor_loader.h"
#include "engine/model/deepseek_v4/weight_names.h"

namespace spark::engine::model::dsv4 {
namespace {

using core::AttentionType;
using core::MlpType;

Status LoadCompressor(Loader& ld, const std::string& p, int64_t width, int64_t dim, int64_t ratio,
                      int64_t hidden, CompressorWeights* c) {
  SPARK_ASSIGN_OR_RETURN(c->wkv, ld.Matrix(p + "wkv.weight", {width, hidden}));
  SPARK_ASSIGN_OR_RETURN(c->wgate, ld.Matrix(p + "wgate.weight", {width, hidden}));
  SPARK_ASSIGN_OR_RETURN(c->ape, ld.Float(p + "ape", {ratio, width}));
  SPARK_ASSIGN_OR_RETURN(c->norm, ld.Float(p + "norm.weight", {dim}));
  return Status::Ok();
}

}  // namespace

Status LoadAttentionCore(Loader& ld, const std::string& p, const core::ModelConfig& c,
                         const ShardRanges& r, LayerWeights* l) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const int64_t hidden = c.hidden_size, hd = c.head_dim, heads = c.num_heads;
  SPARK_ASSIGN_OR_RETURN(l->attn_norm, ld.Float(p + "attn_norm.weight", {hidden}));
  SPARK_ASSIGN_OR_RETURN(l->sinks, ld.Float(p + "attn.attn_sink", {heads}));
  l->sinks = SliceRows(l->sinks, 1, r.heads);
  SPARK_ASSIGN_OR_RETURN(l->wq_a, ld.Matrix(p + "attn.wq_a.weight", {d.q_lora_rank, hidden}));
  SPARK_ASSIGN_OR_RETURN(l->q_norm, ld.Float(p + "attn.q_norm.weight", {d.q_lora_rank}));
  SPARK_ASSIGN_OR_RETURN(l->wq_b, ld.Matrix(p + "attn.wq_b.weight", {heads * hd, d.q_lora_rank}));
  l->wq_b = SliceRows(l->wq_b, {r.heads.begin * hd, r.heads.size * hd});
  SPARK_ASSIGN_OR_RETURN(l->wkv, ld.Matrix(p + "attn.wkv.weight", {hd, hidden}));
  SPARK_ASSIGN_OR_RETURN(l->kv_norm, ld.Float(p + "attn.kv_norm.weight", {hd}));
  SPARK_ASSIGN_OR_RETURN(Mat wo_a,
                         ld.Matrix(p + "attn.wo_a.weight",
                                   {int64_t{d.o_groups} * d.o_lora_rank, heads * hd / d.o_groups}));
  SPARK_ASSIGN_OR_RETURN(
      l->wo_b, ld.Matrix(p + "attn.wo_b.weight", {hidden, int64_t{d.o_groups} * d.o_lora_rank}));
  const int64_t ol = d.o_lora_rank;
  // Each local group's block, its columns of this rank's heads; with whole groups (the world
  // size divides o_groups) one row slice.
  const bool whole = r.GroupHeads(0).size == r.heads_per_group &&
                     r.GroupHeads(r.groups.size - 1).size == r.heads_per_group;
  if (whole) {
    l->wo_a = SliceRows(wo_a, {r.groups.begin * ol, r.groups.size * ol});
  } else {
    for (int64_t i = 0; i < r.groups.size; ++i) {
      const int64_t g = r.groups.begin + i;
      const Range mine = r.GroupHeads(i);
      const Mat block = SliceCols(SliceRows(wo_a, {g * ol, ol}),
                                  {(mine.begin - g * r.heads_per_group) * hd, mine.size * hd});
      // Unequal groups are one block after another: kept as fp32 values in that order.
      Vec v = std::move(l->wo_a.values);
      const Vec add = Decoded(block);
      v.insert(v.end(), add.begin(), add.end());
      const auto size = static_cast<int64_t>(v.size());
      l->wo_a = Mat::Floats(std::move(v), 1, size);
    }
  }
  l->wo_b = SliceCols(l->wo_b, {r.groups.begin * ol, r.groups.size * ol});
  return Status::Ok();
}

namespace {

Status LoadAttention(Loader& ld, const std::string& p, const core::ModelConfig& c,
                     const ShardRanges& r, LayerWeights* l) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  SPARK_RETURN_IF_ERROR(LoadAttentionCore(ld, p, c, r, l));
  if (l->attention == AttentionType::kHeavilyCompressed) {
    return LoadCompressor(ld, p + "attn.compressor.", hd, hd, d.compress_rate_hca, hidden,
                          &l->compressor);
  }
  if (l->attention != AttentionType::kCompressedSparse) return Status::Ok();
  const int64_t idim = d.index_head_dim, ih = d.index_n_heads;
  SPARK_RETURN_IF_ERROR(LoadCompressor(ld, p + "attn.compressor.", 2 * hd, hd, d.compress_rate_csa,
                                       hidden, &l->compressor));
  SPARK_RETURN_IF_ERROR(LoadCompressor(ld, p + "attn.indexer.compressor.", 2 * idim, idim,
                                       d.compress_rate_csa, hidden, &l->index_compressor));
  SPARK_ASSIGN_OR_RETURN(l->index_wq_b,
                         ld.Matrix(p + "attn.indexer.wq_b.weight", {ih * idim, d.q_lora_rank}));
  SPARK_ASSIGN_OR_RETURN(l->index_weights,
                         ld.Matrix(p + "attn.indexer.weights_proj.weight", {ih, hidden}));
  return Status::Ok();
}

// transformers' module layout: experts fused as gate_up_proj [E, 2I, H] and down_proj [E, H, I].
Status LoadFusedExperts(Loader& ld, const TensorSource& src, int layer, const core::ModelConfig& c,
                        const ShardRanges& r, LayerWeights* l) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
  const RawTensor* gu = src.Find(p + "gate_up_proj");
  const RawTensor* dn = src.Find(p + "down_proj");
  if (gu == nullptr || dn == nullptr)
    return ld.Missing("layers." + std::to_string(layer) + ".ffn.experts.0.w1.weight");
  const int64_t e = c.moe.num_experts, inter = c.moe.intermediate_size, hidden = c.hidden_size;
  if (gu->shape != std::vector<int64_t>{e, 2 * inter, hidden}) {
    return Loader::ShapeError(*gu, {e, 2 * inter, hidden});
  }
  if (dn->shape != std::vector<int64_t>{e, hidden, inter}) {
    return Loader::ShapeError(*dn, {e, hidden, inter});
  }
  if (gu->dtype != "F32" && gu->dtype != "BF16" && gu->dtype != "F16") {
    return InvalidArgumentError(gu->file + ": tensor '" + gu->name + "': dtype " + gu->dtype +
                                " is not supported for fused experts (F32, BF16 or F16)");
  }
  ld.MarkUsed(*gu);
  ld.MarkUsed(*dn);
  SPARK_ASSIGN_OR_RETURN(core::DType dtype, core::ParseDType(gu->dtype));
  const size_t elem = core::DTypeSize(dtype);
  const size_t gu_count = 2 * inter * hidden, dn_count = hidden * inter;
  for (int64_t i = r.experts.begin; i < r.experts.end(); ++i) {
    Vec a(gu_count), b(dn_count);
    core::ConvertToFloat(dtype, gu->bytes.data() + i * gu_count * elem, gu_count, a.data());
    core::ConvertToFloat(dtype, dn->bytes.data() + i * dn_count * elem, dn_count, b.data());
    const Mat fused = Mat::Floats(std::move(a), 2 * inter, hidden);
    l->expert_gate_up.push_back(
        StackRows(SliceRows(fused, r.expert_channels),
                  SliceRows(fused, {inter + r.expert_channels.begin, r.expert_channels.size})));
    l->expert_down.push_back(SliceCols(Mat::Floats(std::move(b), hidden, inter),
                                       r.expert_channels));
  }
  return Status::Ok();
}

}  // namespace

Status LoadMoe(Loader& ld, const TensorSource& src, int layer, const core::ModelConfig& c,
               const ShardRanges& r, LayerWeights* l) {
  return LoadMoeAt(ld, src, "layers." + std::to_string(layer) + ".", layer, c, r, l);
}

Status LoadMoeAt(Loader& ld, const TensorSource& src, const std::string& p, int layer,
                 const core::ModelConfig& c, const ShardRanges& r, LayerWeights* l) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size, e = c.moe.num_experts;
  SPARK_ASSIGN_OR_RETURN(l->ffn_norm, ld.Float(p + "ffn_norm.weight", {hidden}));
  SPARK_ASSIGN_OR_RETURN(l->router, ld.Matrix(p + "ffn.gate.weight", {e, hidden}));
  if (l->mlp == MlpType::kHashMoe) {
    SPARK_ASSIGN_OR_RETURN(l->tid2eid,
                           ld.Ints(p + "ffn.gate.tid2eid", {c.vocab_size, c.moe.top_k}));
    for (int32_t id : l->tid2eid) {
      if (id < 0 || id >= e) {
        return InvalidArgumentError(src.dir() + ": tensor '" + p + "ffn.gate.tid2eid' holds " +
                                    "expert id " + std::to_string(id) + ", outside [0, " +
                                    std::to_string(e) + ")");
      }
    }
  } else {
    SPARK_ASSIGN_OR_RETURN(l->router_bias, ld.Float(p + "ffn.gate.bias", {e}));
  }
  SPARK_RETURN_IF_ERROR(LoadSwiGlu(ld, p + "ffn.shared_experts.", inter, hidden, r.shared_channels,
                                   &l->shared_gate_up, &l->shared_down));
  if (!ld.Has(p + "ffn.experts.0.w1.weight")) return LoadFusedExperts(ld, src, layer, c, r, l);
  for (int64_t i = 0; i < e; ++i) {
    const std::string expert = p + "ffn.experts." + std::to_string(i) + ".";
    if (i < r.experts.begin || i >= r.experts.end()) {
      ld.Skip(expert);  // another rank's expert
      continue;
    }
    Mat gate_up, down;
    SPARK_RETURN_IF_ERROR(
        LoadSwiGlu(ld, expert, inter, hidden, r.expert_channels, &gate_up, &down));
    l->expert_gate_up.push_back(std::move(gate_up));
    l->expert_down.push_back(std::move(down));
  }
  return Status::Ok();
}

Result<ShardRanges> PlanShard(const core::ModelConfig& c, const TpShard& shard, MoeSharding moe) {
  FieldErrors e;
  auto divides = [&](const char* key, int64_t v) {
    if (v % shard.size != 0) {
      e.Add(key, "= " + std::to_string(v) + " is not divisible by the tensor-parallel size " +
                     std::to_string(shard.size) + "; pick a size that divides it");
    }
  };
  divides("num_attention_heads", c.num_heads);
  divides("moe_intermediate_size", c.moe.intermediate_size);
  if (moe == MoeSharding::kByExpert) divides("n_routed_experts", c.moe.num_experts);
  SPARK_RETURN_IF_ERROR(e.ToStatus("config.json (tensor parallelism)"));
  ShardRanges r;
  r.heads = shard.Even(c.num_heads);
  r.heads_per_group = c.num_heads / c.dsv4.o_groups;
  const int64_t first = r.heads.begin / r.heads_per_group;
  r.groups = {first, (r.heads.end() - 1) / r.heads_per_group + 1 - first};
  r.shared_channels = shard.Even(c.moe.intermediate_size);
  const bool by_expert = moe == MoeSharding::kByExpert;
  r.experts = by_expert ? shard.Even(c.moe.num_experts) : Range{0, c.moe.num_experts};
  r.expert_channels = by_expert ? Range{0, c.moe.intermediate_size} : r.shared_channels;
  r.vocab = shard.Vocab(c.vocab_size);
  return r;
}

Result<Weights> LoadWeights(const TensorSource& source, const core::ModelConfig& c,
                            const TpShard& shard, MoeSharding moe, ReadObserver on_read,
                            WeightTypes types) {
  Loader ld(source, std::move(on_read), V4Naming(), types);
  Weights w;
  w.types = types;
  SPARK_ASSIGN_OR_RETURN(w.ranges, PlanShard(c, shard, moe));
  const ShardRanges& r = w.ranges;
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size, n = c.residual_streams;
  SPARK_ASSIGN_OR_RETURN(Vec embed, ld.Float("embed.weight", {vocab, hidden}));
  w.embed = SliceRows(embed, hidden, r.vocab);
  if (!c.tie_word_embeddings) {
    SPARK_ASSIGN_OR_RETURN(Mat head, ld.Matrix("head.weight", {vocab, hidden}));
    w.head = SliceRows(head, r.vocab);
  }
  SPARK_ASSIGN_OR_RETURN(w.final_norm, ld.Float("norm.weight", {hidden}));
  SPARK_ASSIGN_OR_RETURN(w.hc_head_fn, ld.Float("hc_head_fn", {n, n * hidden}));
  SPARK_ASSIGN_OR_RETURN(w.hc_head_base, ld.Float("hc_head_base", {n}));
  SPARK_ASSIGN_OR_RETURN(w.hc_head_scale, ld.Float("hc_head_scale", {1}));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights l;
    l.attention = c.layers[i].attention;
    l.mlp = c.layers[i].mlp;
    SPARK_RETURN_IF_ERROR(LoadHc(ld, p, "attn", n, hidden, &l.hc_attn));
    SPARK_RETURN_IF_ERROR(LoadHc(ld, p, "ffn", n, hidden, &l.hc_ffn));
    SPARK_RETURN_IF_ERROR(LoadAttention(ld, p, c, r, &l));
    SPARK_RETURN_IF_ERROR(LoadMoe(ld, source, i, c, r, &l));
    w.layers.push_back(std::move(l));
  }
  SPARK_RETURN_IF_ERROR(ld.CheckAllUsed());
  return w;
}

}  // namespace spark::engine::model::dsv4
