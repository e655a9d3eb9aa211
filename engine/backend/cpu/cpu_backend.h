// CpuBackend: the fp32 reference backend. Every op runs on a small thread pool over all cores
// (or the count given), partitioned statically so results are the same from run to run; GEMMs
// are blocked so a tile of weight rows stays in cache while every token row passes over it.
// Accuracy target: max|ours - transformers| / max|transformers| < 1e-4 on the fixtures.
// Thread-safety: one op at a time (see Backend).
#pragma once

#include <atomic>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"
#include "base/thread_pool.h"

namespace spark::engine::backend::cpu {

class CpuBackend : public Backend {
 public:
  // threads <= 0: one per hardware thread.
  explicit CpuBackend(int threads = 0);

  std::string name() const override { return "cpu"; }
  int threads() const { return pool_.size(); }

  Result<Buffer> Allocate(size_t count) override;
  // The requested sizes (count x 4 bytes) of live buffers.
  size_t bytes_in_use() const override { return *in_use_; }
  // The most bytes_in_use() reached since construction or the last ResetPeak() (the memory plan
  // is tested against it).
  size_t peak_bytes_in_use() const { return *peak_; }
  void ResetPeak() { *peak_ = in_use_->load(); }
  void Upload(std::span<const float> host, float* dst) override;
  void Download(const float* src, std::span<float> host) override;
  // bf16 weights are kept for correctness checks (Linear widens them per call; not fast).
  Result<Buffer> AllocateWeights(size_t count, DType dtype) override;
  bool HoldsWeights(DType dtype) const override {
    return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kFP8;
  }
  void UploadWeights(std::span<const float> host, Buffer& dst) override;
  // Copied at once, rows split over the pool.
  Status UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) override;

  void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                 std::span<const int32_t> ids, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
               Output out) override;
  void Linear(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
              float* out) override;
  void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
            double theta) override;
  void Add(float* x, const float* y, size_t count) override;
  void SiluMul(const float* gate_up, int64_t rows, int inter, Output out) override;
  void SplitColumns(const float* src, int64_t rows, std::span<const ColumnSlice> parts) override;
  void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
               const KvCacheRef& cache) override;
  void PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                      const KvCacheRef& cache, const AttentionShape& shape, float* out) override;
  void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
           const MoeExperts& experts, float* out) override;
  DeepseekOps* deepseek_ops() override { return &deepseek_; }

 private:
  ThreadPool pool_;
  // Shared with the buffers' release functions (a buffer may outlive the backend).
  std::shared_ptr<std::atomic<size_t>> in_use_ = std::make_shared<std::atomic<size_t>>(0);
  std::shared_ptr<std::atomic<size_t>> peak_ = std::make_shared<std::atomic<size_t>>(0);
  CpuDeepseekOps deepseek_{*this, pool_};
};

// Single-threaded helpers shared by the ops and their tests.
float Dot(const float* a, const float* b, int n);
// One row of RmsNorm: out = x / sqrt(mean(x^2) + eps) * weight ([dim]); out may be x.
void RmsNormRow(const float* x, const float* weight, int dim, float eps, float* out);
// Softmax of the router logits, the top-k experts (ties: lower id first) and their weights,
// renormalised when norm_topk_prob.
void RouteTopK(const float* logits, int num_experts, int top_k, bool norm_topk_prob, int* ids,
               float* weights);

}  // namespace spark::engine::backend::cpu
