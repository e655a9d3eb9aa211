// CudaDeepseekOps: DeepSeek-V4's and V4.1's ops (deepseek_ops.h) on a CudaBackend, each enqueued
// on the backend's stream like its other ops (host spans staged through the backend, nothing
// pending between calls, errors kept in the backend's status()). Every op computes what the fp32
// reference (engine/backend/cpu/cpu_deepseek_*.cc) computes, in fp32, up to summation order;
// selections (top-k, candidate blocks, routing) break ties as the reference does, so the chosen
// sets agree wherever the scores agree.
// Split by concern: cuda_deepseek_cache.cc (RoPE, cache fields, compressors),
// cuda_deepseek_attention.cc (indexer, sparse attention), cuda_deepseek_hc.cc (mHC),
// cuda_deepseek_v41.cc (fake quantisers, candidate blocks, Engram gate), cuda_deepseek_moe.cc
// (routing, experts, the grouped output projection), over kernels/deepseek_*.cu.
// Thread-safety: as the backend that owns it (one op at a time).
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/backend/deepseek_ops.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda {

class CudaBackend;

class CudaDeepseekOps : public DeepseekOps {
 public:
  explicit CudaDeepseekOps(CudaBackend& backend) : b_(backend) {}

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
  // cuda_deepseek_moe.cc
  // The device table of the kernels' views of a layer's expert matrices (gate_up or down),
  // built once per expert list (weights do not move) outside graph steps.
  Result<const kernels::QuantMatrix*> ExpertTable(std::span<const SwiGluWeights> experts,
                                                  bool down, int n, int k);
  struct CachedTable {
    std::vector<const void*> matrices;  // what the table was built from
    Buffer table;
  };
  // Routed experts into ys [tokens * top_k, hidden] (row a: assignment a's weighted output).
  Status GroupedExperts(const MoeExpertsArgs& a, float* ys);
  Status Fp32Experts(const MoeExpertsArgs& a, float* ys);
  Status SharedExpert(const MoeExpertsArgs& a, float* out);
  Status SwiGlu(const float* x, int64_t rows, int hidden, const SwiGluWeights& w, int inter,
                float limit, float* out);
  Status GroupedLinearImpl(const float* x, int64_t rows, std::span<const int> group_in,
                           WeightRef w, int out_per_group, float* y);

  // The ops that validate host inputs or plan launches; InvalidArgument for inputs the kernels
  // do not take, FailedPrecondition inside a graph step (internal::RefuseInGraph).
  Status CompressImpl(const CompressArgs& a);
  Status IndexerTopKImpl(const IndexerArgs& a);
  Status SparseAttentionImpl(const SparseAttentionArgs& a);
  Status CandidateBlocksImpl(const CandidateBlockArgs& a);

  CudaBackend& b_;
  std::map<std::pair<const void*, bool>, CachedTable> expert_tables_;
};

}  // namespace spark::engine::backend::cuda
