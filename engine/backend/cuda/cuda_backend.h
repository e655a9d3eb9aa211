// CudaBackend: the Backend interface on one CUDA device, over the kernels in kernels/ and
// cuBLASLt GEMMs. Buffers are fp32 device memory from a caching allocator; every op is enqueued
// on the backend's one stream, so ops run in call order without host synchronisation. The
// small host spans an op takes (token ids, positions, slots, block tables) are copied through a
// pinned staging area; Download synchronises the stream.
//
// Ops cannot return errors through the Backend interface: the first CUDA or cuBLAS error is
// logged and kept, status() returns it, and Download fails loudly (logs) from then on.
// Accuracy: fp32 throughout (GEMMs in exact fp32 unless allow_tf32); matches CpuBackend to
// about 1e-5 relative on the fixtures.
// Thread-safety: one op at a time (see Backend); the calling thread may change between ops.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <utility>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_allocator.h"
#include "kernels/gemm.h"

namespace spark::engine::backend::cuda {

class CudaBackend : public Backend {
 public:
  struct Options {
    int device = 0;           // CUDA device ordinal
    bool allow_tf32 = false;  // fp32 GEMMs on TF32 tensor cores (faster, ~1e-3 error)
  };

  // Unavailable when the device does not exist (the message gives the count); Internal for
  // CUDA/cuBLAS start-up failures.
  static Result<std::unique_ptr<CudaBackend>> Create(const Options& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int device() const { return options_.device; }
  cudaStream_t stream() const { return stream_; }
  // The first error any op met (Ok if none).
  Status status() const { return status_; }
  // Waits for all enqueued work; returns status() or the stream's error.
  Status Synchronize();

  Result<Buffer> Allocate(size_t count) override;
  void Upload(std::span<const float> host, float* dst) override;
  void Download(const float* src, std::span<float> host) override;

  void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                 std::span<const int32_t> ids, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
               float* out) override;
  void Linear(const float* x, int64_t rows, int in_features, const float* w, int out_features,
              float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
            double theta) override;
  void Add(float* x, const float* y, size_t count) override;
  void SiluMul(const float* gate_up, int64_t rows, int inter, float* out) override;
  void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
               float* k_cache, float* v_cache) override;
  void PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                      const float* k_cache, const float* v_cache, const AttentionShape& shape,
                      float* out) override;
  void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
           const MoeExperts& experts, float* out) override;

 private:
  explicit CudaBackend(const Options& options) : options_(options) {}
  // Copies host bytes to device scratch valid until the next Download/Synchronize.
  Result<void*> Stage(const void* host, size_t bytes);
  template <typename T>
  Result<const T*> Stage(std::span<const T> host) {
    SPARK_ASSIGN_OR_RETURN(void* p, Stage(host.data(), host.size_bytes()));
    return static_cast<const T*>(p);
  }
  // Device scratch freed when the returned handle dies.
  Result<Buffer> Scratch(size_t bytes);
  void Record(const Status& s);
  void Activate();
  Status PagedAttentionImpl(const float* q, std::span<const AttentionSequence> sequences,
                            const float* k_cache, const float* v_cache, const AttentionShape& shape,
                            float* out);
  Status MoeImpl(const float* x, int64_t rows, int hidden, const float* router_logits,
                 const MoeExperts& experts, float* out);
  Result<const float*> InvFreq(int head_dim, double theta);

  Options options_;
  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
  Status status_;
  DeviceAllocator allocator_;
  std::unique_ptr<kernels::Gemm> gemm_;
  // Staging: pinned host and device areas of staging_bytes_, used up to staging_used_.
  char* staging_host_ = nullptr;
  char* staging_device_ = nullptr;
  size_t staging_bytes_ = 0;
  size_t staging_used_ = 0;
  int32_t* counts_host_ = nullptr;  // pinned, for the MoE expert counts
  std::map<std::pair<int, double>, Buffer> inv_freq_;
};

}  // namespace spark::engine::backend::cuda
