#include "engine/model/deepseek_v4/attention.h"

#include <cmath>

namespace spark::engine::model::dsv4 {

using core::AttentionType;

// The inputs of one Forward call.
struct Attention::Step {
  int layer = 0;
  const LayerBuffers* l = nullptr;
  const LayerRecord* rec = nullptr;
  backend::RopeTable rope;               // main (sliding layers) or compress
  const CompressedPlan* plan = nullptr;  // null for sliding layers
  const StepPlan* step = nullptr;
  const ForwardBatch* batch = nullptr;
  PagedKvCache* cache = nullptr;
  Workspace* ws = nullptr;

  bool csa() const { return l->attention == AttentionType::kCompressedSparse; }
  backend::CacheField Ref(const CacheLayout& layout, const Field& f) const {
    return layout.Ref(*cache, layer, f);
  }
};

// One compressor of a layer (the attention's or the indexer's): weights, cache fields, entry
// width, overlap, and the step's rows for its projections.
struct Attention::Compressor {
  const CompressorBuffers& w;
  const Field &kv, &gate, &out;
  int dim = 0;
  bool overlap = false;
  float* kv_rows = nullptr;
  float* gate_rows = nullptr;
};

Attention::Attention(const core::ModelConfig& config, const BackendWeights& weights,
                     const CacheLayout& layout, backend::Backend& backend,
                     backend::DeepseekOps& ops)
    : c_(config), w_(weights), layout_(layout), backend_(backend), ops_(ops) {
  for (int64_t g = 0; g < w_.ranges.groups.size; ++g) {
    group_in_.push_back(static_cast<int>(w_.ranges.GroupHeads(g).size) * config.head_dim);
  }
}

void Attention::Forward(int layer, const ForwardBatch& batch, const StepPlan& plan,
                        PagedKvCache& cache, Workspace& ws) const {
  Step s;
  s.layer = layer;
  s.l = &w_.layers[layer];
  s.rec = &layout_.layer(layer);
  s.step = &plan;
  s.batch = &batch;
  s.cache = &cache;
  s.ws = &ws;
  const AttentionType type = s.l->attention;
  s.rope = type == AttentionType::kSliding ? w_.main_rope() : w_.compress_rope();
  s.plan = type == AttentionType::kCompressedSparse    ? &plan.csa
           : type == AttentionType::kHeavilyCompressed ? &plan.hca
                                                       : nullptr;
  Queries(s);
  StoreWindow(s);
  if (s.plan != nullptr) StoreCompressed(s);
  Attend(s);
}

// ws.q = per-head RMSNorm(wq_b q_norm(wq_a a)), roped, for this rank's heads; ws.qr the latent.
void Attention::Queries(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int ql = c_.dsv4.q_lora_rank, hd = c_.head_dim;
  const int heads = static_cast<int>(w_.ranges.heads.size);
  const float eps = c_.rms_norm_eps;
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->wq_a.weight(), ql, ws.qr.data());
  backend_.RmsNorm(ws.qr.data(), s.l->q_norm.data(), n, ql, eps, ws.qr.data());
  backend_.Linear(ws.qr.data(), n, ql, s.l->wq_b.weight(), heads * hd, ws.q.data());
  backend_.RmsNorm(ws.q.data(), w_.unit_head_norm.data(), n * heads, hd, eps, ws.q.data());
  ops_.Rope(ws.q.data(), s.batch->positions, heads, hd, s.rope, /*inverse=*/false);
}

// The shared KV head (kv_norm(wkv a), roped) into each token's window field.
void Attention::StoreWindow(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int hd = c_.head_dim;
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->wkv.weight(), hd, ws.kv.data());
  backend_.RmsNorm(ws.kv.data(), s.l->kv_norm.data(), n, hd, c_.rms_norm_eps, ws.kv.data());
  ops_.Rope(ws.kv.data(), s.batch->positions, 1, hd, s.rope, /*inverse=*/false);
  ops_.WriteField(ws.kv.data(), s.batch->slots, s.Ref(layout_, s.rec->window));
}

// Compressor (and indexer) inputs of every token, the entries of the windows the batch's tokens
// close (all their inputs sit at earlier or equal positions), and for CSA the indexer's top-k.
void Attention::StoreCompressed(const Step& s) const {
  const core::DeepseekV4Settings& d = c_.dsv4;
  const LayerRecord& rec = *s.rec;
  Workspace& ws = *s.ws;
  Compress(s, {s.l->compressor, rec.comp_kv, rec.comp_gate, rec.entry, c_.head_dim, s.csa(),
               ws.comp_kv.data(), ws.comp_gate.data()});
  if (!s.csa()) return;
  const int di = d.index_head_dim, ih = d.index_n_heads;
  Compress(s, {s.l->index_compressor, rec.idx_kv, rec.idx_gate, rec.idx_key, di, true,
               ws.idx_kv.data(), ws.idx_gate.data()});
  const int64_t n = ws.tokens;
  backend_.Linear(ws.qr.data(), n, d.q_lora_rank, s.l->index_wq_b.weight(), ih * di, ws.idx_q.data());
  ops_.Rope(ws.idx_q.data(), s.batch->positions, ih, di, w_.compress_rope(), /*inverse=*/false);
  backend_.Linear(ws.block_in.data(), n, c_.hidden_size, s.l->index_weights.weight(), ih,
                  ws.idx_w.data());
  ops_.IndexerTopK({.q = ws.idx_q.data(),
                    .weights = ws.idx_w.data(),
                    .weight_scale = 1.0f / std::sqrt(static_cast<float>(ih)),
                    .heads = ih,
                    .dim = di,
                    .keys = s.Ref(layout_, rec.idx_key),
                    .candidates = s.plan->candidates.view(),
                    .top_k = d.index_topk,
                    .selected = ws.selected.data()});
}

// One compressor: its projections of every token stored, then the closed windows pooled.
void Attention::Compress(const Step& s, const Compressor& c) const {
  const int64_t n = s.ws->tokens;
  const int width = c.kv.width;
  const float* a = s.ws->block_in.data();
  backend_.Linear(a, n, c_.hidden_size, c.w.wkv.weight(), width, c.kv_rows);
  backend_.Linear(a, n, c_.hidden_size, c.w.wgate.weight(), width, c.gate_rows);
  const backend::CacheField kv = s.Ref(layout_, c.kv), gate = s.Ref(layout_, c.gate);
  ops_.WriteCompressorInputs({.kv = c.kv_rows,
                              .gate = c.gate_rows,
                              .ape = c.w.ape.data(),
                              .width = width,
                              .ratio = s.plan->ratio,
                              .kv_field = kv,
                              .gate_field = gate},
                             s.batch->positions, s.batch->slots);
  const Compression& closed = s.plan->compression;
  const backend::RopeTable rope = w_.compress_rope();
  ops_.Compress({.kv = kv,
                 .gate = gate,
                 .dim = c.dim,
                 .pool = closed.pool,
                 .overlap = c.overlap,
                 .source_slots = closed.source_slots,
                 .entry_slots = closed.entry_slots,
                 .entry_positions = closed.entry_positions,
                 .norm = c.w.norm.data(),
                 .eps = c_.rms_norm_eps,
                 .rope = &rope,
                 .out = s.Ref(layout_, c.out)});
}

// Window + compressed-entry attention, the output's rope channels rotated back, and the grouped
// output projection: each group of heads through its own wo_a block, then wo_b. Under tensor
// parallelism a rank projects only its heads of each group it touches; by linearity the partial
// sums add up in the all-reduce after wo_b.
void Attention::Attend(const Step& s) const {
  Workspace& ws = *s.ws;
  const int64_t n = ws.tokens;
  const int hd = c_.head_dim, heads = static_cast<int>(w_.ranges.heads.size);
  const bool compressed = s.plan != nullptr;
  ops_.SparseAttention(
      {.q = ws.q.data(),
       .heads = heads,
       .head_dim = hd,
       .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
       .sequences = s.step->sequences,
       .block_size = s.cache->block_size(),
       .window = c_.dsv4.sliding_window,
       .window_keys = s.Ref(layout_, s.rec->window),
       .entries = s.Ref(layout_, s.rec->entry),
       .candidates = compressed ? s.plan->candidates.view() : backend::EntryCandidates{},
       .selected = s.csa() ? ws.selected.data() : nullptr,
       .top_k = c_.dsv4.index_topk,
       .sinks = s.l->sinks.data(),
       .out = ws.o.data()});
  ops_.Rope(ws.o.data(), s.batch->positions, heads, hd, s.rope, /*inverse=*/true);
  const int ol = c_.dsv4.o_lora_rank;
  ops_.GroupedLinear(ws.o.data(), n, group_in_, s.l->wo_a.weight(), ol, ws.grouped.data());
  backend_.Linear(ws.grouped.data(), n, static_cast<int>(group_in_.size()) * ol, s.l->wo_b.weight(),
                  c_.hidden_size, ws.block_out.data());
}

}  // namespace spark::engine::model::dsv4
