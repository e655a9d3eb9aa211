// DeepseekOps: the operations DeepSeek-V4's and V4.1's forward need beyond the common Backend ops —
// hyper-connections (mHC), the compressors, the lightning indexer, sparse attention with sinks,
// the partial interleaved RoPE, per-token cache fields and the MoE routing and experts.
//
// A separate interface so that a backend without them is refused by the model instead of
// stubbing them: Backend::deepseek_ops() returns null unless the backend implements this.
// The same rules as Backend: buffers in backend memory, small integer inputs as host spans,
// every op a plain function of its inputs with a CPU reference (engine/backend/cpu/), no op
// fails once its inputs are valid (the model validates the batch). The ops are parameterised
// (ratios, overlap, optional gates, masks, explicit entry lists) so that later DeepSeek
// variants reuse them; the structs of deepseek_op_args.h document each field.
// Thread-safety: as the Backend that owns it (one op at a time).
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/deepseek_op_args.h"

namespace spark::engine::backend {

class DeepseekOps {
 public:
  virtual ~DeepseekOps() = default;

  // Rotates x [tokens, heads, dim] in place: each head vector's trailing table.rope_dim
  // channels at its token's position; `inverse` turns the other way (sin negated).
  virtual void Rope(float* x, std::span<const int32_t> positions, int heads, int dim,
                    const RopeTable& table, bool inverse) = 0;
  // Stores rows [tokens, field.width] at the tokens' cache slots.
  virtual void WriteField(const float* rows, std::span<const int64_t> slots,
                          const CacheField& field) = 0;
  // Stores kv and gate (plus ape[position % ratio]) of each token at its slot.
  virtual void WriteCompressorInputs(const CompressorInputs& in, std::span<const int32_t> positions,
                                     std::span<const int64_t> slots) = 0;
  // Pools the cached inputs of each entry into the entry field (CompressArgs).
  virtual void Compress(const CompressArgs& a) = 0;
  // The lightning indexer's top-k candidates of each query (IndexerArgs).
  virtual void IndexerTopK(const IndexerArgs& a) = 0;
  // Window + compressed-entry attention with sinks (SparseAttentionArgs).
  virtual void SparseAttention(const SparseAttentionArgs& a) = 0;
  // Grouped projection: group g takes the next group_in[g] columns of x [rows, sum group_in]
  // through its block of w (blocks [out_per_group, group_in[g]] one after another, so with equal
  // group_in one [groups * out_per_group, group_in] matrix, the only form a quantised w takes)
  // into columns [g * out_per_group, (g + 1) * out_per_group) of y [rows, groups *
  // out_per_group].
  virtual void GroupedLinear(const float* x, int64_t rows, std::span<const int> group_in,
                             WeightRef w, int out_per_group, float* y) = 0;

  // streams[t, j] = x[t] for each of the n streams ([tokens, n, hidden] from [tokens, hidden]).
  virtual void HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams) = 0;
  // The mixing weights of an mHC site, or the pre weights of the head (HcMixArgs).
  virtual void HcMix(const HcMixArgs& a) = 0;
  // out[t] = sum_j pre[t, j] * streams[t, j] ([tokens, hidden]).
  virtual void HcCollapse(const float* streams, const float* pre, int64_t tokens, int n, int hidden,
                          float* out) = 0;
  // streams[t, k] = post[t, k] * block_out[t] + sum_j comb[t, j, k] * streams[t, j], in place.
  virtual void HcPost(float* streams, const float* block_out, const float* post, const float* comb,
                      int64_t tokens, int n, int hidden) = 0;

  // Expert ids and weights of each token (RouteArgs).
  virtual void Route(const RouteArgs& a) = 0;
  // Routed and shared SwiGLU experts of each token (MoeExpertsArgs).
  virtual void MoeExperts(const MoeExpertsArgs& a) = 0;

  // DeepSeek-V4.1: FP8 / FP4 fake quantisation in place (FakeQuantArgs), the candidate-block
  // mask of the two-level top-k (CandidateBlockArgs) and Engram's gated write (EngramGateArgs).
  virtual void FakeQuant(const FakeQuantArgs& a) = 0;
  virtual void CandidateBlocks(const CandidateBlockArgs& a) = 0;
  virtual void EngramGate(const EngramGateArgs& a) = 0;
};

}  // namespace spark::engine::backend
