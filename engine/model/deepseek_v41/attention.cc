#include "engine/model/deepseek_v41/attention.h"

#include <cmath>

namespace spark::engine::model::dsv41 {

using backend::FakeQuantFormat;

// The inputs of one Forward call.
struct Attention::Step {
  int layer = 0;
  int source = -1;  // the KV source whose entries this layer reads; -1 for window-only layers
  const dsv4::LayerBuffers* l = nullptr;
  backend::RopeTable rope;                     // main (ratio 0) or compress
  const dsv4::CompressedPlan* plan = nullptr;  // of the layer's ratio; null for ratio 0
  const StepPlan* step = nullptr;
  const ForwardBatch* batch = nullptr;
  PagedKvCache* cache = nullptr;
  Workspace* ws = nullptr;

  int ratio(const core::ModelConfig& c) const { return c.dsv41.compress_ratios[layer]; }
};

Attention::Attention(const core::ModelConfig& config, const BackendWeights& weights,
                     const CacheLayout& layout, backend::Backend& backend,
                     backend::DeepseekOps& ops)
    : c_(config), w_(weights), layout_(layout), backend_(backend), ops_(ops) {
  const dsv4::ShardRanges& r = w_.base.ranges;
  for (int64_t g = 0; g < r.groups.size; ++g) {
    group_in_.push_back(static_cast<int>(r.GroupHeads(g).size) * config.head_dim);
  }
}

void Attention::Forward(int layer, const ForwardBatch& batch, const StepPlan& plan,
                        PagedKvCache& cache, Workspace& ws) const {
  Step s;
  s.layer = layer;
  s.source = c_.dsv41.KvSourceOf(layer);
  s.l = &w_.base.layers[layer];
  s.step = &plan;
  s.batch = &batch;
  s.cache = &cache;
  s.ws = &ws;
  const int ratio = s.ratio(c_);
  s.rope = ratio == 0 ? w_.base.main_rope() : w_.base.compress_rope();
  s.plan = ratio == 0 ? nullptr : &plan.ratio(ratio);
  Queries(s);
  StoreWindow(s);
  if (s.plan != nullptr && c_.dsv41.IsKvSource(layer)) StoreEntries(s);
  if (s.plan != nullptr && c_.dsv41.IsIndexSource(layer)) Index(s);
  Attend(s);
}

// ws.q = wq_b(q_norm(wq_a a)), roped, for this rank's heads; ws.qr the latent.
void Attention::Queries(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int ql = c_.dsv4.q_lora_rank, hd = c_.head_dim;
  const int heads = static_cast<int>(w_.base.ranges.heads.size);
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->wq_a.weight(), ql, ws.qr.data());
  backend_.RmsNorm(ws.qr.data(), s.l->q_norm.data(), n, ql, c_.rms_norm_eps, ws.qr.data());
  backend_.Linear(ws.qr.data(), n, ql, s.l->wq_b.weight(), heads * hd, ws.q.data());
  ops_.Rope(ws.q.data(), s.batch->positions, heads, hd, s.rope, /*inverse=*/false);
}

// The shared KV head (kv_norm(wkv a), roped, FP8) into each token's window field.
void Attention::StoreWindow(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int hd = c_.head_dim;
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->wkv.weight(), hd, ws.kv.data());
  backend_.RmsNorm(ws.kv.data(), s.l->kv_norm.data(), n, hd, c_.rms_norm_eps, ws.kv.data());
  ops_.Rope(ws.kv.data(), s.batch->positions, 1, hd, s.rope, /*inverse=*/false);
  ops_.FakeQuant({ws.kv.data(), n, hd, 32, FakeQuantFormat::kFp8Ue8m0});
  ops_.WriteField(ws.kv.data(), s.batch->slots,
                  layout_.Ref(*s.cache, s.layer, layout_.layer(s.layer).window));
}

// A KV source's latents of the entries the step closes: at ratio 1 every token's
// norm(wkv a); above, the softmax pooling of the group's cached kv and gate projections.
void Attention::StoreEntries(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int hd = c_.head_dim, ratio = s.ratio(c_);
  const float* a = ws.block_in.data();
  const dsv4::CompressorBuffers& cw = s.l->compressor;
  if (ratio == 1) {
    backend_.Linear(a, n, c_.hidden_size, cw.wkv.weight(), hd, ws.latent.data());
    backend_.RmsNorm(ws.latent.data(), cw.norm.data(), n, hd, c_.rms_norm_eps, ws.latent.data());
    return PublishEntries(s, n, s.batch->positions, s.batch->slots);
  }
  const LayerRecord& rec = layout_.layer(s.layer);
  const backend::CacheField kv = layout_.Ref(*s.cache, s.layer, rec.comp_kv);
  const backend::CacheField gate = layout_.Ref(*s.cache, s.layer, rec.comp_gate);
  backend_.Linear(a, n, c_.hidden_size, cw.wkv.weight(), hd, ws.comp_kv.data());
  backend_.Linear(a, n, c_.hidden_size, cw.wgate.weight(), hd, ws.comp_gate.data());
  ops_.WriteCompressorInputs({.kv = ws.comp_kv.data(),
                              .gate = ws.comp_gate.data(),
                              .width = hd,
                              .ratio = ratio,
                              .kv_field = kv,
                              .gate_field = gate},
                             s.batch->positions, s.batch->slots);
  const dsv4::Compression& closed = s.plan->compression;
  if (closed.entry_slots.empty()) return;
  ops_.Compress({.kv = kv,
                 .gate = gate,
                 .dim = hd,
                 .pool = closed.pool,
                 .overlap = false,
                 .source_slots = closed.source_slots,
                 .entry_slots = closed.entry_slots,
                 .entry_positions = closed.entry_positions,
                 .norm = cw.norm.data(),
                 .eps = c_.rms_norm_eps,
                 .out_rows = ws.latent.data()});
  PublishEntries(s, static_cast<int64_t>(closed.entry_slots.size()), closed.entry_positions,
                 closed.entry_slots);
}

// From `count` pre-RoPE latents in ws.latent: the indexer keys, then the entries (the latents
// roped in place), each fake-quantised and written at its closing token's slot.
void Attention::PublishEntries(const Step& s, int64_t count, std::span<const int32_t> positions,
                               std::span<const int64_t> slots) const {
  Workspace& ws = *s.ws;
  const int hd = c_.head_dim, di = c_.dsv4.index_head_dim;
  const LayerRecord& rec = layout_.layer(s.layer);
  const backend::RopeTable rope = w_.base.compress_rope();
  backend_.Linear(ws.latent.data(), count, hd, w_.index_wk[s.layer].weight(), di,
                  ws.index_key.data());
  backend_.RmsNorm(ws.index_key.data(), w_.index_k_norm[s.layer].data(), count, di, c_.rms_norm_eps,
                   ws.index_key.data());
  ops_.Rope(ws.index_key.data(), positions, 1, di, rope, /*inverse=*/false);
  ops_.FakeQuant({ws.index_key.data(), count, di, 32, FakeQuantFormat::kFp4Ue8m0});
  ops_.WriteField(ws.index_key.data(), slots, layout_.Ref(*s.cache, s.layer, rec.index_key));
  ops_.Rope(ws.latent.data(), positions, 1, hd, rope, /*inverse=*/false);
  ops_.FakeQuant({ws.latent.data(), count, hd, 16, FakeQuantFormat::kFp4E4m3});
  ops_.WriteField(ws.latent.data(), slots, layout_.Ref(*s.cache, s.layer, rec.entry));
}

// The index source's top-k into ws.selected (inside the candidate blocks after the candidate
// source, whose block mask it publishes in ws.candidate_mask).
void Attention::Index(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int di = c_.dsv4.index_head_dim, ih = c_.dsv4.index_n_heads;
  const core::DeepseekV41Settings& v = c_.dsv41;
  backend_.Linear(ws.qr.data(), n, c_.dsv4.q_lora_rank, s.l->index_wq_b.weight(), ih * di,
                  ws.idx_q.data());
  ops_.Rope(ws.idx_q.data(), s.batch->positions, ih, di, w_.base.compress_rope(), false);
  ops_.FakeQuant({ws.idx_q.data(), n * ih, di, 32, FakeQuantFormat::kFp4Ue8m0});
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->index_weights.weight(), ih,
                  ws.idx_w.data());
  const bool candidate_source = s.layer == v.candidate_source_layer_id;
  const bool masked = v.candidate_source_layer_id >= 0 && s.layer > v.candidate_source_layer_id;
  ops_.IndexerTopK({.q = ws.idx_q.data(),
                    .weights = ws.idx_w.data(),
                    .weight_scale = 1.0f / std::sqrt(static_cast<float>(ih)),
                    .heads = ih,
                    .dim = di,
                    .keys = layout_.Ref(*s.cache, s.source, layout_.layer(s.source).index_key),
                    .candidates = s.plan->candidates.view(),
                    .mask = masked ? ws.candidate_mask.data() : nullptr,
                    .mask_stride = ws.stride,
                    .top_k = c_.dsv4.index_topk,
                    .selected = ws.selected.data(),
                    .scores = candidate_source ? ws.scores.data() : nullptr});
  if (!candidate_source) return;
  ops_.CandidateBlocks({.scores = ws.scores.data(),
                        .count = s.plan->candidates.count,
                        .stride = ws.stride,
                        .block_size = v.candidate_block_size,
                        .top_blocks = v.candidate_topk_blocks,
                        .mask = ws.candidate_mask.data()});
}

// Window + selected shared entries with sinks, the output's rope channels rotated back, and the
// grouped output projection (partial sums under tensor parallelism, reduced after wo_b).
void Attention::Attend(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int hd = c_.head_dim, heads = static_cast<int>(w_.base.ranges.heads.size);
  const bool compressed = s.plan != nullptr;
  ops_.SparseAttention(
      {.q = ws.q.data(),
       .heads = heads,
       .head_dim = hd,
       .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
       .sequences = s.step->sequences,
       .block_size = s.cache->block_size(),
       .window = c_.dsv4.sliding_window,
       .window_keys = layout_.Ref(*s.cache, s.layer, layout_.layer(s.layer).window),
       .entries = compressed ? layout_.Ref(*s.cache, s.source, layout_.layer(s.source).entry)
                             : backend::CacheField{},
       .candidates = compressed ? s.plan->candidates.view() : backend::EntryCandidates{},
       .selected = compressed ? ws.selected.data() : nullptr,
       .top_k = c_.dsv4.index_topk,
       .sinks = s.l->sinks.data(),
       .out = ws.o.data()});
  ops_.Rope(ws.o.data(), s.batch->positions, heads, hd, s.rope, /*inverse=*/true);
  const int ol = c_.dsv4.o_lora_rank;
  ops_.GroupedLinear(ws.o.data(), n, group_in_, s.l->wo_a.weight(), ol, ws.grouped.data());
  backend_.Linear(ws.grouped.data(), n, static_cast<int>(group_in_.size()) * ol, s.l->wo_b.weight(),
                  c_.hidden_size, ws.block_out.data());
}

}  // namespace spark::engine::model::dsv41
