#include "engine/model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/model/deepseek_v4/ops.h"

namespace spark::engine::model::dsv4 {

using core::AttentionType;

// The state of one Forward call: the layer, the batch and per-token intermediates.
struct Attention::Step {
  int layer = 0;
  const LayerWeights* l = nullptr;
  const LayerRecord* rec = nullptr;
  const RopeTable* rope = nullptr;
  int ratio = 0;  // 0 for sliding-only layers
  const ForwardBatch* batch = nullptr;
  PagedKvCache* cache = nullptr;
  const float* a = nullptr;
  std::vector<const BatchSequence*> seq;  // per token
  std::vector<float> q;                   // [tokens, heads * D], normed and roped
  std::vector<float> index_q;             // [tokens, index heads * dI], roped (CSA)
  std::vector<float> index_w;             // [tokens, index heads], scaled (CSA)

  int64_t tokens() const { return static_cast<int64_t>(seq.size()); }
  int position(int64_t t) const { return batch->positions[t]; }
  // KV slot of position `pos` of token t's sequence.
  int64_t Slot(int64_t t, int64_t pos) const {
    const int bs = cache->block_size();
    return int64_t{seq[t]->block_table[pos / bs]} * bs + pos % bs;
  }
};

Attention::Attention(const core::ModelConfig& config, const Weights& weights,
                     const CacheLayout& layout, backend::Backend& backend)
    : c_(config),
      w_(weights),
      layout_(layout),
      backend_(backend),
      main_(config.rope_theta, config.dsv4.rope_head_dim),
      compress_(config.dsv4.compress_rope_theta, config.dsv4.rope_head_dim,
                config.dsv4.compress_yarn) {}

void Attention::Linear(const float* x, int64_t rows, int in, const Vec& w, int out_features,
                       float* out) const {
  backend_.Linear(x, rows, in, w.data(), out_features, out);
}

void Attention::Forward(int layer, const float* a, const ForwardBatch& batch, PagedKvCache& cache,
                        float* out) const {
  const core::DeepseekV4Settings& d = c_.dsv4;
  Step s;
  s.layer = layer;
  s.l = &w_.layers[layer];
  s.rec = &layout_.layer(layer);
  s.batch = &batch;
  s.cache = &cache;
  s.a = a;
  const AttentionType type = s.l->attention;
  s.rope = type == AttentionType::kSliding ? &main_ : &compress_;
  s.ratio = type == AttentionType::kCompressedSparse    ? d.compress_rate_csa
            : type == AttentionType::kHeavilyCompressed ? d.compress_rate_hca
                                                        : 0;
  for (const BatchSequence& seq : batch.sequences) {
    for (int64_t i = 0; i < seq.query_len; ++i) s.seq.push_back(&seq);
  }
  const std::vector<float> qr = Queries(s);
  StoreWindow(s);
  if (s.ratio > 0) StoreCompressed(s, qr);
  // Attention per query, then the rope channels rotated back.
  const int hd = c_.head_dim, heads = static_cast<int>(w_.ranges.heads.size);
  std::vector<float> o(s.tokens() * heads * hd);
  for (int64_t t = 0; t < s.tokens(); ++t) {
    AttendOne(s, t, &o[t * heads * hd]);
    for (int h = 0; h < heads; ++h) {
      s.rope->Apply(&o[(t * heads + h) * hd], hd, s.position(t), /*inverse=*/true);
    }
  }
  OutputProjection(s, o, out);
}

// q = per-head RMSNorm(wq_b q_norm(wq_a a)), roped, for this rank's heads; returns the latent qr.
std::vector<float> Attention::Queries(Step& s) const {
  const int64_t n = s.tokens();
  const int ql = c_.dsv4.q_lora_rank, hd = c_.head_dim;
  const int heads = static_cast<int>(w_.ranges.heads.size);
  std::vector<float> qr(n * ql);
  Linear(s.a, n, c_.hidden_size, s.l->wq_a, ql, qr.data());
  RmsNormRows(qr.data(), n, ql, s.l->q_norm.data(), c_.rms_norm_eps);
  s.q.resize(n * heads * hd);
  Linear(qr.data(), n, ql, s.l->wq_b, heads * hd, s.q.data());
  RmsNormRows(s.q.data(), n * heads, hd, nullptr, c_.rms_norm_eps);
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < heads; ++h) s.rope->Apply(&s.q[(t * heads + h) * hd], hd, s.position(t));
  }
  return qr;
}

// The shared KV head (kv_norm(wkv a), roped) into each token's window field.
void Attention::StoreWindow(const Step& s) const {
  const int64_t n = s.tokens();
  const int hd = c_.head_dim;
  std::vector<float> kv(n * hd);
  Linear(s.a, n, c_.hidden_size, s.l->wkv, hd, kv.data());
  RmsNormRows(kv.data(), n, hd, s.l->kv_norm.data(), c_.rms_norm_eps);
  for (int64_t t = 0; t < n; ++t) {
    s.rope->Apply(&kv[t * hd], hd, s.position(t));
    std::copy_n(&kv[t * hd], hd, layout_.At(*s.cache, s.layer, s.batch->slots[t], s.rec->window));
  }
}

// Compressor (and indexer) projections of every token, the entries of the windows the batch's
// tokens close, and the indexer's queries and head weights.
void Attention::StoreCompressed(Step& s, const std::vector<float>& qr) const {
  const core::DeepseekV4Settings& d = c_.dsv4;
  const int64_t n = s.tokens();
  const bool csa = s.l->attention == AttentionType::kCompressedSparse;
  const int hd = c_.head_dim, di = d.index_head_dim, ih = d.index_n_heads;
  StoreProjections(s, s.l->compressor, s.rec->comp_kv, s.rec->comp_gate, s.rec->comp_kv.width);
  if (csa) StoreProjections(s, s.l->index_compressor, s.rec->idx_kv, s.rec->idx_gate, 2 * di);
  // A token that closes a window emits its entry (all inputs sit at earlier or equal positions).
  for (int64_t t = 0; t < n; ++t) {
    const int p = s.position(t);
    if ((p + 1) % s.ratio != 0) continue;
    const int64_t window = (p + 1) / s.ratio - 1, slot = s.batch->slots[t];
    std::vector<float> e =
        Compress(s, t, s.rec->comp_kv, s.rec->comp_gate, hd, csa, s.l->compressor.norm, window);
    std::copy(e.begin(), e.end(), layout_.At(*s.cache, s.layer, slot, s.rec->entry));
    if (!csa) continue;
    e = Compress(s, t, s.rec->idx_kv, s.rec->idx_gate, di, true, s.l->index_compressor.norm,
                 window);
    std::copy(e.begin(), e.end(), layout_.At(*s.cache, s.layer, slot, s.rec->idx_key));
  }
  if (!csa) return;
  s.index_q.resize(n * ih * di);
  Linear(qr.data(), n, d.q_lora_rank, s.l->index_wq_b, ih * di, s.index_q.data());
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < ih; ++h) compress_.Apply(&s.index_q[(t * ih + h) * di], di, s.position(t));
  }
  s.index_w.resize(n * ih);
  Linear(s.a, n, c_.hidden_size, s.l->index_weights, ih, s.index_w.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(ih));
  for (float& v : s.index_w) v *= scale;
}

// Grouped output projection: each group of heads through its own wo_a block, then wo_b. Under
// tensor parallelism a rank projects only its heads of each group it touches; by linearity the
// partial sums add up in the all-reduce after wo_b.
void Attention::OutputProjection(const Step& s, const std::vector<float>& o, float* out) const {
  const int64_t n = s.tokens();
  const ShardRanges& r = w_.ranges;
  const int hd = c_.head_dim, heads = static_cast<int>(r.heads.size);
  const int groups = static_cast<int>(r.groups.size), ol = c_.dsv4.o_lora_rank;
  std::vector<float> group_out(n * ol), mixed(n * groups * ol);
  const float* wo_a = s.l->wo_a.data();
  for (int g = 0; g < groups; ++g) {
    const Range mine = r.GroupHeads(g);
    const int in = static_cast<int>(mine.size) * hd;
    std::vector<float> group_in(n * in);
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(&o[(t * heads + (mine.begin - r.heads.begin)) * hd], in, &group_in[t * in]);
    }
    backend_.Linear(group_in.data(), n, in, wo_a, ol, group_out.data());
    wo_a += int64_t{ol} * in;
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(&group_out[t * ol], ol, &mixed[(t * groups + g) * ol]);
    }
  }
  Linear(mixed.data(), n, groups * ol, s.l->wo_b, c_.hidden_size, out);
}

void Attention::StoreProjections(const Step& s, const CompressorWeights& w, const Field& kv_field,
                                 const Field& gate_field, int width) const {
  const int64_t n = s.tokens();
  std::vector<float> kv(n * width), gate(n * width);
  Linear(s.a, n, c_.hidden_size, w.wkv, width, kv.data());
  Linear(s.a, n, c_.hidden_size, w.wgate, width, gate.data());
  for (int64_t t = 0; t < n; ++t) {
    const float* ape = &w.ape[static_cast<int64_t>(s.position(t) % s.ratio) * width];
    for (int i = 0; i < width; ++i) gate[t * width + i] += ape[i];
    const int64_t slot = s.batch->slots[t];
    std::copy_n(&kv[t * width], width, layout_.At(*s.cache, s.layer, slot, kv_field));
    std::copy_n(&gate[t * width], width, layout_.At(*s.cache, s.layer, slot, gate_field));
  }
}

std::vector<float> Attention::Compress(const Step& s, int64_t token, const Field& kv_field,
                                       const Field& gate_field, int dim, bool overlap,
                                       const Vec& norm, int64_t window) const {
  // (kv, gate) rows of the pooled slots: with overlap, the previous window's first series
  // (missing for window 0) and this window's second series; else this window's only series.
  std::vector<std::pair<const float*, const float*>> slots;
  const int r = s.ratio;
  auto add = [&](int64_t pos, int offset) {
    const int64_t slot = s.Slot(token, pos);
    slots.emplace_back(layout_.At(*s.cache, s.layer, slot, kv_field) + offset,
                       layout_.At(*s.cache, s.layer, slot, gate_field) + offset);
  };
  if (overlap && window > 0) {
    for (int i = 0; i < r; ++i) add((window - 1) * r + i, 0);
  }
  for (int i = 0; i < r; ++i) add(window * r + i, overlap ? dim : 0);
  std::vector<float> entry(dim), logits(slots.size());
  for (int ch = 0; ch < dim; ++ch) {
    for (size_t i = 0; i < slots.size(); ++i) logits[i] = slots[i].second[ch];
    Softmax(logits);
    float sum = 0;
    for (size_t i = 0; i < slots.size(); ++i) sum += logits[i] * slots[i].first[ch];
    entry[ch] = sum;
  }
  RmsNormRows(entry.data(), 1, dim, norm.data(), c_.rms_norm_eps);
  compress_.Apply(entry.data(), dim, static_cast<int>(window * r));
  return entry;
}

// Positions of the tokens whose entry slots hold the compressed entries query `token` attends.
std::vector<int64_t> Attention::CompressedEntries(const Step& s, int64_t token) const {
  std::vector<int64_t> closers;
  if (s.ratio == 0) return closers;
  const int r = s.ratio;
  const int64_t visible = (s.position(token) + 1) / r;
  if (s.l->attention == AttentionType::kHeavilyCompressed) {
    for (int64_t w = 0; w < visible; ++w) closers.push_back(w * r + r - 1);
    return closers;
  }
  // Lightning indexer: score[w] = sum_h weight_h * ReLU(q_h . key_w) / sqrt(dI); keep top-k.
  const int di = c_.dsv4.index_head_dim, ih = c_.dsv4.index_n_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(di));
  std::vector<float> scores(visible);
  for (int64_t w = 0; w < visible; ++w) {
    const float* key = layout_.At(*s.cache, s.layer, s.Slot(token, w * r + r - 1), s.rec->idx_key);
    float score = 0;
    for (int h = 0; h < ih; ++h) {
      const float* q = &s.index_q[(token * ih + h) * di];
      float dot = 0;
      for (int i = 0; i < di; ++i) dot += q[i] * key[i];
      score += std::max(dot, 0.0f) * scale * s.index_w[token * ih + h];
    }
    scores[w] = score;
  }
  for (int w : TopK(scores, c_.dsv4.index_topk)) closers.push_back(int64_t{w} * r + r - 1);
  return closers;
}

void Attention::AttendOne(const Step& s, int64_t token, float* out) const {
  const int hd = c_.head_dim, heads = static_cast<int>(w_.ranges.heads.size);
  const int64_t p = s.position(token);
  std::vector<const float*> keys;
  for (int64_t j = std::max<int64_t>(0, p - c_.dsv4.sliding_window + 1); j <= p; ++j) {
    keys.push_back(layout_.At(*s.cache, s.layer, s.Slot(token, j), s.rec->window));
  }
  for (int64_t closer : CompressedEntries(s, token)) {
    keys.push_back(layout_.At(*s.cache, s.layer, s.Slot(token, closer), s.rec->entry));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> logits(keys.size() + 1);
  for (int h = 0; h < heads; ++h) {
    const float* q = &s.q[(token * heads + h) * hd];
    for (size_t k = 0; k < keys.size(); ++k) {
      float dot = 0;
      for (int i = 0; i < hd; ++i) dot += q[i] * keys[k][i];
      logits[k] = dot * scale;
    }
    logits.back() = s.l->sinks[h];  // the sink takes probability mass and contributes nothing
    Softmax(logits);
    float* o = out + h * hd;
    std::fill(o, o + hd, 0.0f);
    for (size_t k = 0; k < keys.size(); ++k) {
      for (int i = 0; i < hd; ++i) o[i] += logits[k] * keys[k][i];
    }
  }
}

}  // namespace spark::engine::model::dsv4
