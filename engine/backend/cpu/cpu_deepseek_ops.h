// CpuDeepseekOps: the fp32 reference implementation of DeepseekOps (deepseek_ops.h), owned by a
// CpuBackend. Each op reproduces the arithmetic order of transformers' formulas as written in
// deepseek_op_args.h (softmax sums in double, dot products accumulated in order), so a device
// implementation can be checked against it. Work is split over the backend's thread pool by
// token (or token and head), each item computed alone, so results do not depend on the thread
// count. Split by concern: cpu_deepseek_cache.cc (RoPE, cache fields, compressors),
// cpu_deepseek_attention.cc (indexer, attention, grouped projection), cpu_deepseek_hc.cc (mHC),
// cpu_deepseek_moe.cc (routing, experts), cpu_deepseek_v41.cc (V4.1's fake quantisers,
// candidate blocks, Engram).
// Thread-safety: one op at a time (see Backend).
#pragma once

#include "engine/backend/backend.h"
#include "base/thread_pool.h"
#include "engine/backend/deepseek_ops.h"

namespace spark::engine::backend::cpu {

class CpuDeepseekOps : public DeepseekOps {
 public:
  // `backend` runs the Linear ops inside these; both must outlive this object.
  CpuDeepseekOps(Backend& backend, ThreadPool& pool) : backend_(backend), pool_(pool) {}

  void Rope(float* x, std::span<const int32_t> positions, int heads, int dim,
            const RopeTable& table, bool inverse) override;
  void WriteField(const float* rows, std::span<const int64_t> slots,
                  const CacheField& field) override;
  void WriteCompressorInputs(const CompressorInputs& in, std::span<const int32_t> positions,
                             std::span<const int64_t> slots) override;
  void Compress(const CompressArgs& a) override;
  void IndexerTopK(const IndexerArgs& a) override;
  void SparseAttention(const SparseAttentionArgs& a) override;
  void GroupedLinear(const float* x, int64_t rows, std::span<const int> group_in, WeightRef w,
                     int out_per_group, float* y) override;

  void HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams) override;
  void HcMix(const HcMixArgs& a) override;
  void HcCollapse(const float* streams, const float* pre, int64_t tokens, int n, int hidden,
                  float* out) override;
  void HcPost(float* streams, const float* block_out, const float* post, const float* comb,
              int64_t tokens, int n, int hidden) override;

  void Route(const RouteArgs& a) override;
  void MoeExperts(const MoeExpertsArgs& a) override;

  void FakeQuant(const FakeQuantArgs& a) override;
  void CandidateBlocks(const CandidateBlockArgs& a) override;
  void EngramGate(const EngramGateArgs& a) override;

 private:
  // out[rows, hidden] = w.down(SwiGLU(x w.gate_up^T)) with the clamp of `limit`.
  void SwiGlu(const float* x, int64_t rows, int hidden, const SwiGluWeights& w, int inter,
              float limit, float* out);

  Backend& backend_;
  ThreadPool& pool_;
};

}  // namespace spark::engine::backend::cpu
