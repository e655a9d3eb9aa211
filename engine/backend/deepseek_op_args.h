// The plain argument structs of DeepseekOps (deepseek_ops.h). Pointers are backend memory unless
// a field says "host"; shapes are row-major with one row per token.
//
// Ids and indices that ops compute (expert ids, selected entries) are kept as floats in fp32
// buffers, exact below 2^24, as Backend::ArgMax keeps token ids: one buffer type for every
// backend and no integer uploads.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/backend.h"

namespace spark::engine::backend {

// Rotary frequencies of a partial, interleaved RoPE: the trailing `rope_dim` channels of a
// vector ([nope | rope]) turn in pairs (2i, 2i + 1) by position * inv_freq[i].
struct RopeTable {
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  int rope_dim = 0;                 // even, at most the vector width
  float scale = 1.0f;               // cos and sin are scaled by it (YaRN's attention factor)
};

// A per-token field of one layer's paged cache: `width` floats at base + slot * stride + offset.
struct CacheField {
  float* base = nullptr;  // the layer's K or V array
  int stride = 0;         // floats per slot of that array (the layer's K or V width)
  int offset = 0;         // the field's first float within a slot
  int width = 0;
  bool present() const { return base != nullptr; }
};

// The compressed entries each query may attend (host): query t's candidates are
// slots[first[t] .. first[t] + count[t]), oldest first. Queries of one sequence share its list
// (a prefix each), so the spans stay small for long contexts. Empty spans: no candidates.
struct EntryCandidates {
  std::span<const int64_t> slots;  // the cache slots holding the entries
  std::span<const int64_t> first;  // [tokens]
  std::span<const int32_t> count;  // [tokens]
};

// Per-token compressor inputs, stored for later pooling (WriteCompressorInputs).
struct CompressorInputs {
  const float* kv = nullptr;    // [tokens, width]
  const float* gate = nullptr;  // [tokens, width]; null: no gate field
  const float* ape = nullptr;   // [ratio, width] added to gate at position % ratio; null: none
  int width = 0;
  int ratio = 1;
  CacheField kv_field, gate_field;
};

// Softmax pooling of cached compressor inputs into entries (Compress). Entry e pools the `pool`
// tokens at source_slots[e * pool ..]: per channel c, softmax over the sources of gate[c], then
// the weighted sum of kv[c]. Without overlap a source reads channels [0, dim) of its fields;
// with overlap (fields 2 * dim wide) sources [0, pool / 2) read [0, dim) and the rest [dim,
// 2 dim). A slot of -1 is a missing source (gate -inf: weight 0, its kv unread). The entry is
// then RMS-normalised (when `norm`), rotated at entry_positions[e] (when `rope`) and written at
// entry_slots[e] of `out`.
struct CompressArgs {
  CacheField kv, gate;  // gate absent: equal weights (a copy when pool is 1)
  int dim = 0;
  int pool = 0;
  bool overlap = false;
  std::span<const int64_t> source_slots;     // host [entries, pool]
  std::span<const int64_t> entry_slots;      // host [entries]
  std::span<const int32_t> entry_positions;  // host [entries]
  const float* norm = nullptr;               // [dim] RMSNorm weight; null: no norm
  float eps = 1e-6f;
  const RopeTable* rope = nullptr;  // host struct; null: no rotation
  CacheField out;                   // [dim] per entry
  float* out_rows = nullptr;        // instead of `out`: entry e at out_rows + e * dim
};

// Lightning-indexer scores and top-k (IndexerTopK). For query t and candidate c:
//   score = sum_h ReLU(q[t, h] . key_c) * dim^-0.5 * weights[t, h] * weight_scale
//           (+ mask[t * mask_stride + c] when a mask is given),
// key_c read from `keys` at the candidate's slot. The top_k best candidates are written to
// selected[t] as candidate indices (positions in the query's list), best first, ties to the
// lower index; rows with fewer candidates (or scores of -inf) are padded with -1.
struct IndexerArgs {
  const float* q = nullptr;        // [tokens, heads, dim], rotated
  const float* weights = nullptr;  // [tokens, heads]
  float weight_scale = 1.0f;
  int heads = 0, dim = 0;
  CacheField keys;  // [dim]
  EntryCandidates candidates;
  const float* mask = nullptr;  // optional [tokens, mask_stride] additive; -inf drops a candidate
  int mask_stride = 0;
  int top_k = 0;
  float* selected = nullptr;  // out [tokens, top_k]
  // Optional out [tokens, mask_stride]: each candidate's score (mask included), -inf from the
  // query's count on (the input of the two-level top-k, CandidateBlocks).
  float* scores = nullptr;
};

// Attention over a sliding window and compressed entries with a sink (SparseAttention). Query i
// of a sequence sits at position p = context_len - query_len + i and attends, in this order, the
// window keys of positions max(0, p - window + 1) .. p (from `window_keys` through the block
// table), then its candidates (all of them when `selected` is null, else selected[t][0..top_k)
// in that order, -1 skipped). Keys are the values (K = V). Per head h: logits q . k * scale and
// a sink logit sinks[h] that takes probability mass and adds nothing; out = sum p_k k.
struct SparseAttentionArgs {
  const float* q = nullptr;  // [tokens, heads, head_dim]
  int heads = 0, head_dim = 0;
  float scale = 1.0f;
  std::span<const AttentionSequence> sequences;  // host; block tables for the window
  int block_size = 0;
  int window = 0;
  CacheField window_keys;  // [head_dim] per token slot
  CacheField entries;      // [head_dim] per entry slot; absent when there are no candidates
  EntryCandidates candidates;
  const float* selected = nullptr;  // optional [tokens, top_k] from IndexerTopK
  int top_k = 0;
  const float* sinks = nullptr;  // [heads]
  float* out = nullptr;          // [tokens, heads, head_dim]
};

// mHC mixing weights of a site (HcMix) for streams X [tokens, n, hidden]: f = the n * hidden
// floats of a token times rsqrt(mean(f^2) + norm_eps) (no weight); m = fn f. Then
//   pre_j  = sigmoid(m_j * scale[0] + base_j) + hc_eps
//   post_j = 2 sigmoid(m_{n+j} * scale[1] + base_{n+j})
//   comb   = Sinkhorn(row softmax(m_{2n+..} * scale[2] + base_{2n+..}) + hc_eps): a column
//            normalisation, then sinkhorn_iters - 1 rounds of rows then columns (each sum +
//            hc_eps).
// Pre only (post and comb null): fn has n rows and scale one value (the model's final head).
struct HcMixArgs {
  const float* streams = nullptr;  // [tokens, n, hidden]
  int64_t tokens = 0;
  int n = 0, hidden = 0;
  const float* fn = nullptr;     // [n (n + 2), n * hidden], or [n, n * hidden] pre only
  const float* base = nullptr;   // [n (n + 2)] or [n]
  const float* scale = nullptr;  // [3] or [1]
  float norm_eps = 1e-6f, hc_eps = 1e-6f;
  int sinkhorn_iters = 1;
  float* pre = nullptr;   // out [tokens, n]
  float* post = nullptr;  // out [tokens, n], or null
  float* comb = nullptr;  // out [tokens, n, n]: comb[j * n + k] mixes stream j into k; or null
};

// DeepSeek-V4 MoE routing (Route): scores s = sqrt(softplus(logits)); selection: the rows of
// hash_table at each token id (hash layers), else the top_k of s + bias (ties to the lower id;
// the bias steers selection only). Weights: s[e] / (sum of selected s + 1e-20) * scaling.
struct RouteArgs {
  const float* logits = nullptr;  // [tokens, experts]
  int64_t tokens = 0;
  int experts = 0, top_k = 0;
  const float* bias = nullptr;         // [experts], or null
  const float* hash_table = nullptr;   // [vocab, top_k] expert ids, or null: top-k selection
  std::span<const int32_t> token_ids;  // host [tokens]; read for hash routing
  float scaling = 1.0f;
  float temperature = 1.0f;  // logits are divided by it before the score (V4.1's gate_temp)
  float* ids = nullptr;      // out [tokens, top_k] global expert ids
  float* weights = nullptr;  // out [tokens, top_k]
};

// One SwiGLU expert: gate_up [2 inter, hidden] (gate rows then up rows), down [hidden, inter].
struct SwiGluWeights {
  WeightRef gate_up, down;
};

// Routed experts plus an always-on shared expert (MoeExperts): per token,
//   out = sum_i weights[i] * E_{ids[i]}(x) (selection order; experts outside this rank's
//         [expert_begin, expert_begin + experts.size()) add nothing) + shared(x),
//   E(x) = down(silu(min(gate, limit)) * clamp(up, -limit, limit)), unclamped when limit <= 0.
struct MoeExpertsArgs {
  const float* x = nullptr;  // [tokens, hidden]
  int64_t tokens = 0;
  int hidden = 0;
  const float* ids = nullptr;      // [tokens, top_k] from Route
  const float* weights = nullptr;  // [tokens, top_k]
  int top_k = 0;
  int expert_begin = 0;
  std::span<const SwiGluWeights> experts;  // host list of this rank's experts
  int inter = 0;                           // channels of each routed expert on this rank
  SwiGluWeights shared;                    // gate_up.data null: none
  int shared_inter = 0;
  float swiglu_limit = 0.0f;
  float* out = nullptr;  // [tokens, hidden]
};

// DeepSeek-V4.1's quantisation-aware numerics (FakeQuant): each block of `block` channels of a
// row is quantised and dequantised in place, as the reference's fake quantisers do. Per block,
// with amax its largest magnitude:
//   kFp8Ue8m0  scale = 2^ceil(log2(max(amax, 1e-4) / 448)); x = e4m3(clamp(x / scale, +-448))
//   kFp4Ue8m0  scale = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)); x = e2m1(clamp(x / scale, +-6))
//   kFp4E4m3   scale = e4m3(max(amax, 6 * 2^-9) / 6); x = e2m1(clamp(x / scale, +-6))
// times scale, rounding to nearest even. Rows whose width `block` does not divide are left
// unchanged (as the reference leaves them).
enum class FakeQuantFormat { kFp8Ue8m0, kFp4Ue8m0, kFp4E4m3 };
struct FakeQuantArgs {
  float* x = nullptr;  // [rows, width], in place
  int64_t rows = 0;
  int width = 0;
  int block = 32;
  FakeQuantFormat format = FakeQuantFormat::kFp8Ue8m0;
};

// Level one of the two-level top-k (CandidateBlocks): the candidates of query t are split into
// blocks of block_size; a block scores the maximum of its scores, the block holding candidate
// count[t] - 1 is pinned (scores +inf), and the top_blocks best blocks with a finite or pinned
// score are kept (ties to the lower block). mask[t, c] = 0 for c in a kept block, else -inf.
struct CandidateBlockArgs {
  const float* scores = nullptr;   // [tokens, stride] from IndexerArgs::scores
  std::span<const int32_t> count;  // host [tokens]
  int stride = 0;
  int block_size = 0;
  int top_blocks = 0;
  float* mask = nullptr;  // out [tokens, stride]
};

// DeepSeek-V4.1 Engram gated write (EngramGate), per token t and stream j with h = streams[t, j],
// key k = kv[t, j * hidden ..], value v = kv[t, n * hidden ..]:
//   dot  = sum_c(h_c * weight[j, c] * k_c) * rsqrt(mean(h^2) + eps) * rsqrt(mean(k^2) + eps)
//          / sqrt(hidden)
//   gate = sigmoid(sign(dot) * sqrt(max(|dot|, 1e-6)));  h += gate * v.
struct EngramGateArgs {
  float* streams = nullptr;       // [tokens, n, hidden], in place
  const float* kv = nullptr;      // [tokens, (n + 1) * hidden]
  const float* weight = nullptr;  // [n, hidden]: q_weight * k_weight
  int64_t tokens = 0;
  int n = 0, hidden = 0;
  float eps = 1e-20f;
};

}  // namespace spark::engine::backend
