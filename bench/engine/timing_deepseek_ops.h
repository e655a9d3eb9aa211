// spark-deepseek-bench --profile: the DeepseekOps of a CudaBackend, each op timed by a
// TimingBackend (GPU time per op, waiting after each), so one eager step shows where it goes.
#pragma once

#include <string>

#include "bench/engine/timing_backend.h"
#include "engine/backend/deepseek_ops.h"

namespace spark::engine::bench {

class TimingDeepseekOps : public backend::DeepseekOps {
 public:
  TimingDeepseekOps(backend::DeepseekOps& inner, TimingBackend& timer)
      : in_(inner), t_(timer) {}

  void Rope(float* x, std::span<const int32_t> positions, int heads, int dim,
            const backend::RopeTable& table, bool inverse) override {
    t_.Time("ds Rope x" + std::to_string(heads), 0,
            [&] { in_.Rope(x, positions, heads, dim, table, inverse); });
  }
  void WriteField(const float* rows, std::span<const int64_t> slots,
                  const backend::CacheField& field) override {
    t_.Time("ds WriteField", 0, [&] { in_.WriteField(rows, slots, field); });
  }
  void WriteCompressorInputs(const backend::CompressorInputs& in,
                             std::span<const int32_t> positions,
                             std::span<const int64_t> slots) override {
    t_.Time("ds WriteCompressorInputs", 0,
            [&] { in_.WriteCompressorInputs(in, positions, slots); });
  }
  void Compress(const backend::CompressArgs& a) override {
    t_.Time("ds Compress", 0, [&] { in_.Compress(a); });
  }
  void IndexerTopK(const backend::IndexerArgs& a) override {
    t_.Time("ds IndexerTopK", 0, [&] { in_.IndexerTopK(a); });
  }
  void SparseAttention(const backend::SparseAttentionArgs& a) override {
    t_.Time("ds SparseAttention", 0, [&] { in_.SparseAttention(a); });
  }
  void GroupedLinear(const float* x, int64_t rows, std::span<const int> group_in,
                     backend::WeightRef w, int out_per_group, float* y) override {
    t_.Time("ds GroupedLinear " + std::to_string(rows) + " rows", 0,
            [&] { in_.GroupedLinear(x, rows, group_in, w, out_per_group, y); });
  }
  void HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams) override {
    t_.Time("ds HcExpand", 0, [&] { in_.HcExpand(x, tokens, n, hidden, streams); });
  }
  void HcMix(const backend::HcMixArgs& a) override {
    t_.Time("ds HcMix", 0, [&] { in_.HcMix(a); });
  }
  void HcCollapse(const float* streams, const float* pre, int64_t tokens, int n, int hidden,
                  float* out) override {
    t_.Time("ds HcCollapse", 0, [&] { in_.HcCollapse(streams, pre, tokens, n, hidden, out); });
  }
  void HcPost(float* streams, const float* block_out, const float* post, const float* comb,
              int64_t tokens, int n, int hidden) override {
    t_.Time("ds HcPost", 0,
            [&] { in_.HcPost(streams, block_out, post, comb, tokens, n, hidden); });
  }
  void Route(const backend::RouteArgs& a) override {
    t_.Time("ds Route", 0, [&] { in_.Route(a); });
  }
  void MoeExperts(const backend::MoeExpertsArgs& a) override {
    t_.Time("ds MoeExperts " + std::to_string(a.tokens) + " tokens", 0,
            [&] { in_.MoeExperts(a); });
  }
  void FakeQuant(const backend::FakeQuantArgs& a) override {
    t_.Time("ds FakeQuant", 0, [&] { in_.FakeQuant(a); });
  }
  void CandidateBlocks(const backend::CandidateBlockArgs& a) override {
    t_.Time("ds CandidateBlocks", 0, [&] { in_.CandidateBlocks(a); });
  }
  void EngramGate(const backend::EngramGateArgs& a) override {
    t_.Time("ds EngramGate", 0, [&] { in_.EngramGate(a); });
  }

 private:
  backend::DeepseekOps& in_;
  TimingBackend& t_;
};

}  // namespace spark::engine::bench
