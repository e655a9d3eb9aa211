// GEMMs through cuBLASLt: out[m, n] = x[m, k] * w[n, k]^T, the layout of a Linear layer whose
// weight is stored [out_features, in_features] row-major. fp32 (exact fp32 math unless TF32 is
// allowed) and bf16 inputs with fp32 accumulation and an fp32 or bf16 output; and FP8 E4M3
// inputs with block scales (RunFp8: DeepSeek's format, on GPUs whose cuBLASLt has it).
// The algorithm is cached per (types, m, n, k): cuBLASLt's heuristic pick, or for skinny
// shapes the fastest of its candidates timed on the first call.
// Thread-safety: one Gemm per stream/thread; Run is not reentrant.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "base/status.h"

namespace spark::kernels {

enum class GemmType { kF32, kBF16, kFP8 };

class Gemm {
 public:
  struct Options {
    size_t workspace_bytes = 32 << 20;  // cuBLASLt scratch; 32 MiB suits Hopper
    bool allow_tf32 = false;            // fp32 inputs through TF32 tensor cores (~1e-3 error)
    // Skinny shapes (m <= 64, decode batches): time cuBLASLt's first 32 candidates, and split-k
    // variants of the first 8, on the first call outside graph capture, each with the GPU's L2
    // cache flushed before every timed run (a decode step streams its weights from memory; a
    // matrix that fits in L2 would otherwise be timed from cache), and keep the fastest.
    // SPARK_GEMM_TUNE_LOG=1 prints every candidate's time.
    bool autotune = true;
  };

  // Internal when cuBLASLt cannot start; ResourceExhausted for the workspace.
  static Result<std::unique_ptr<Gemm>> Create(const Options& options);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x and w have type `in`, out has type `out_type` (kBF16 output only with kBF16 inputs).
  // Internal naming the shape when cuBLASLt has no algorithm or fails.
  Status Run(GemmType in, GemmType out_type, const void* x, int64_t m, int k, const void* w, int n,
             void* out, cudaStream_t stream);

  // FP8 E4M3 operands with fp32 block scales, fp32 accumulation and output: x [m, k] with one
  // scale per 1 x 128 block, x_scales[kb * m + r] for row r, column block kb (QuantizeRowsFp8
  // writes them); w [n, k] with one per 128 x 128 block, w_scales [n / 128, k / 128] row-major
  // (fp8.h). cuBLASLt's block-scaled FP8 GEMM (Hopper): Unimplemented when this GPU's cuBLASLt
  // has no algorithm for it, or m is not a multiple of 16, k of 512 or n of 128 (the caller
  // pads m, or widens the weights to bf16 instead); SupportsFp8 says so beforehand.
  Status RunFp8(const void* x, const float* x_scales, int64_t m, int k, const void* w,
                const float* w_scales, int n, float* out, cudaStream_t stream);
  bool SupportsFp8(int64_t m, int n, int k) { return CheckFp8(m, n, k).ok(); }
  // Ok, or Unimplemented saying why there is no block-scaled FP8 GEMM of this shape (decided
  // once per shape).
  const Status& CheckFp8(int64_t m, int n, int k);

 private:
  struct Plan;
  using Key = std::tuple<int, int, int64_t, int, int>;
  Gemm() = default;
  Result<Plan*> GetPlan(GemmType in, GemmType out_type, int64_t m, int n, int k);
  // Split-k variants of the plan's first candidates, for Tune (skinny shapes).
  void AddSplitKCandidates(Plan& plan);
  // Times plan's candidates on this call's operands and keeps the fastest in plan->algo.
  // SPARK_GEMM_TUNE_LOG=1 in the environment prints each candidate's time to stderr.
  Status Tune(Plan& plan, const std::string& what, const void* x, const void* w, void* out,
              cudaStream_t stream);
  // Tunes when due (outside capture), then runs plan->algo.
  Status Launch(Plan& plan, const std::string& what, const void* x, const void* w, void* out,
                cudaStream_t stream);

  Options options_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  void* flush_ = nullptr;  // twice the L2 cache, written between timed runs while tuning
  size_t flush_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<std::tuple<int64_t, int, int>, Status> fp8_support_;  // CheckFp8's answers
};

}  // namespace spark::kernels
