// spark-decode-bench --profile: a Backend that forwards every op to a CudaBackend and times it
// with CUDA events (waiting after each op), so one eager step shows where the GPU time goes, per
// op and shape (bytes per op where known, against the copy bandwidth).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/engine/decode_bench_check.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/deepseek_ops.h"

namespace spark::engine::bench {

using backend::Buffer;
using backend::DType;
using backend::cuda::CudaBackend;

class TimingBackend : public backend::Backend {
 public:
  explicit TimingBackend(CudaBackend& inner) : inner_(inner) {
    Cuda(cudaEventCreate(&a_), "event");
    Cuda(cudaEventCreate(&b_), "event");
  }
  std::string name() const override { return "timed " + inner_.name(); }
  Result<Buffer> Allocate(size_t count) override { return inner_.Allocate(count); }
  size_t bytes_in_use() const override { return inner_.bytes_in_use(); }
  Result<Buffer> AllocateWeights(size_t count, DType dtype) override {
    return inner_.AllocateWeights(count, dtype);
  }
  void Upload(std::span<const float> host, float* dst) override { inner_.Upload(host, dst); }
  void UploadWeights(std::span<const float> host, Buffer& dst) override {
    inner_.UploadWeights(host, dst);
  }
  void Download(const float* src, std::span<float> host) override { inner_.Download(src, host); }
  Status status() const override { return inner_.status(); }
  bool HoldsWeights(DType dtype) const override { return inner_.HoldsWeights(dtype); }
  Status UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) override {
    return inner_.UploadWeightBytes(src, dst, dst_offset);
  }
  Status FinishWeightUploads() override { return inner_.FinishWeightUploads(); }
  // The inner backend's DeepseekOps, each op timed like the Backend ops (set_deepseek_ops).
  backend::DeepseekOps* deepseek_ops() override { return deepseek_; }
  void set_deepseek_ops(backend::DeepseekOps* ops) { deepseek_ = ops; }
  void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                 std::span<const int32_t> ids, float* out) override {
    Time("Embedding", 0, [&] { inner_.Embedding(table, row_begin, rows, hidden, ids, out); });
  }
  bool Bf16InputsPay(int64_t rows, DType weights) const override {
    return inner_.Bf16InputsPay(rows, weights);
  }
  void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
               backend::Output out) override {
    Time("RmsNorm " + std::to_string(rows) + "x" + std::to_string(dim), 8.0 * rows * dim,
         [&] { inner_.RmsNorm(x, weight, rows, dim, eps, out); });
  }
  void Linear(backend::Input x, int64_t rows, int in, backend::WeightRef w, int out_f,
              float* out) override {
    Time("Linear " + std::to_string(rows) + "x" + std::to_string(in) + "->" +
             std::to_string(out_f) + " " + DTypeName(w.dtype),
         double(in) * out_f * DTypeBytes(w.dtype),
         [&] { inner_.Linear(x, rows, in, w, out_f, out); });
  }
  void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
            double theta) override {
    Time("Rope", 0, [&] { inner_.Rope(x, positions, heads, head_dim, theta); });
  }
  void Add(float* x, const float* y, size_t count) override {
    Time("Add", 12.0 * count, [&] { inner_.Add(x, y, count); });
  }
  void SiluMul(const float* gate_up, int64_t rows, int inter, backend::Output out) override {
    Time("SiluMul", 12.0 * rows * inter, [&] { inner_.SiluMul(gate_up, rows, inter, out); });
  }
  void SplitColumns(const float* src, int64_t rows,
                    std::span<const backend::ColumnSlice> parts) override {
    Time("SplitColumns", 0, [&] { inner_.SplitColumns(src, rows, parts); });
  }
  void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
               const backend::KvCacheRef& cache) override {
    Time("WriteKv", 0, [&] { inner_.WriteKv(k, v, slots, kv_width, cache); });
  }
  void PagedAttention(const float* q, std::span<const backend::AttentionSequence> sequences,
                      const backend::KvCacheRef& cache, const backend::AttentionShape& shape,
                      float* out) override {
    double bytes = 0;
    for (const auto& seq : sequences) {
      bytes += 2.0 * backend::DTypeBytes(cache.dtype) * seq.context_len * shape.num_kv_heads *
               shape.head_dim;
    }
    Time("PagedAttention", bytes, [&] { inner_.PagedAttention(q, sequences, cache, shape, out); });
  }
  void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
           const backend::MoeExperts& experts, float* out) override {
    Time("Moe", 0, [&] { inner_.Moe(x, rows, hidden, router_logits, experts, out); });
  }
  void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) override {
    Time("ArgMax", 4.0 * rows * cols, [&] { inner_.ArgMax(x, rows, cols, index_offset, out); });
  }
  void LinearMany(backend::Input x, int64_t rows, int in,
                  std::span<const backend::LinearOut> outs) override {
    std::string name = "LinearMany " + std::to_string(rows) + "x" + std::to_string(in) + "->";
    double bytes = 0;
    for (const auto& o : outs) {
      name += std::to_string(o.out_features) + (&o == &outs.back() ? "" : "+");
      bytes += double(in) * o.out_features * DTypeBytes(o.w.dtype);
    }
    Time(name, bytes, [&] { inner_.LinearMany(x, rows, in, outs); });
  }
  void LinearSiluMul(backend::Input x, int64_t rows, int in, backend::WeightRef w, int inter,
                     float* gate_up, backend::Output act) override {
    Time("LinearSiluMul " + std::to_string(rows) + "x" + std::to_string(in) + "->" +
             std::to_string(2 * inter) + " " + DTypeName(w.dtype),
         double(in) * 2 * inter * DTypeBytes(w.dtype),
         [&] { inner_.LinearSiluMul(x, rows, in, w, inter, gate_up, act); });
  }
  void QkNormRopeWriteKv(const backend::QkvToCache& a, std::span<const int32_t> positions,
                         std::span<const int64_t> slots) override {
    Time("QkNormRopeWriteKv " + std::to_string(a.heads) + "+" + std::to_string(a.kv_heads) + "x" +
             std::to_string(a.head_dim),
         0, [&] { inner_.QkNormRopeWriteKv(a, positions, slots); });
  }
  void AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                  float eps, backend::Output out) override {
    Time("AddRmsNorm " + std::to_string(rows) + "x" + std::to_string(dim), 16.0 * rows * dim,
         [&] { inner_.AddRmsNorm(h, delta, weight, rows, dim, eps, out); });
  }
  void LinearAdd(backend::Input x, int64_t rows, int in, backend::WeightRef w, int out_features,
                 float* scratch, float* h) override {
    Time("LinearAdd " + std::to_string(rows) + "x" + std::to_string(in) + "->" +
             std::to_string(out_features) + " " + DTypeName(w.dtype),
         double(in) * out_features * DTypeBytes(w.dtype),
         [&] { inner_.LinearAdd(x, rows, in, w, out_features, scratch, h); });
  }
  void LinearAddRmsNorm(backend::Input x, int64_t rows, int in, backend::WeightRef w,
                        int out_features, float* scratch, float* h, const float* norm, float eps,
                        backend::Output out) override {
    Time("LinearAddRmsNorm " + std::to_string(rows) + "x" + std::to_string(in) + "->" +
             std::to_string(out_features) + " " + DTypeName(w.dtype),
         double(in) * out_features * DTypeBytes(w.dtype),
         [&] { inner_.LinearAddRmsNorm(x, rows, in, w, out_features, scratch, h, norm, eps, out); });
  }
  Status AllReduceAddRmsNorm(comm::Communicator* comm, float* h, float* delta,
                             const float* weight, int64_t rows, int dim, float eps,
                             backend::Output out) override {
    Status s;
    Time("AllReduceAddRmsNorm " + std::to_string(rows) + "x" + std::to_string(dim),
         16.0 * rows * dim,
         [&] { s = inner_.AllReduceAddRmsNorm(comm, h, delta, weight, rows, dim, eps, out); });
    return s;
  }

  // Rows sorted by total time: op, calls, total us, mean us, GB/s (where bytes are known).
  void Print(double copy_gbs) const {
    std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& x, const auto& y) { return x.second.ms > y.second.ms; });
    double total = 0;
    for (const auto& r : rows) total += r.second.ms;
    std::printf("  %-34s %6s %10s %9s %8s %6s\n", "op", "calls", "total us", "mean us", "GB/s",
                "of bw");
    for (const auto& [name, e] : rows) {
      const double gbs = e.bytes > 0 ? e.bytes / (e.ms * 1e-3) / 1e9 : 0;
      std::printf("  %-34s %6d %10.1f %9.2f %8.0f %5.0f%%\n", name.c_str(), e.calls, e.ms * 1e3,
                  e.ms * 1e3 / e.calls, gbs, 100 * gbs / copy_gbs);
    }
    std::printf("  %-34s %6s %10.1f\n", "sum of op times", "", total * 1e3);
  }
  void Clear() { entries_.clear(); }

  // Runs fn (ops enqueued on the inner backend's stream) and adds its GPU time under `name`.
  template <typename Fn>
  void Time(const std::string& name, double bytes, Fn&& fn) {
    Cuda(cudaEventRecord(a_, inner_.stream()), "record");
    fn();
    Cuda(cudaEventRecord(b_, inner_.stream()), "record");
    Cuda(cudaEventSynchronize(b_), "sync");
    float ms = 0;
    Cuda(cudaEventElapsedTime(&ms, a_, b_), "elapsed");
    Entry& e = entries_[name];
    ++e.calls;
    e.ms += ms;
    e.bytes += bytes;
  }

 private:
  struct Entry {
    int calls = 0;
    double ms = 0, bytes = 0;
  };
  CudaBackend& inner_;
  backend::DeepseekOps* deepseek_ = nullptr;
  cudaEvent_t a_, b_;
  std::map<std::string, Entry> entries_;
};

}  // namespace spark::engine::bench
