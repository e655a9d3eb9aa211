// cuBLASLt GEMM: row-major out = x * w^T is, in cuBLAS's column-major terms,
// out^T[n, m] = op(w)[n, k] * x^T[k, m] with w transposed (its row-major [n, k] storage is a
// column-major k x n matrix).
#include "kernels/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/launch_settings.h"

namespace spark::kernels {

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // cuBLASLt's candidates, best first by its heuristic; `tuned` once timed on real data.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

cudaDataType_t CudaType(GemmType t) {
  switch (t) {
    case GemmType::kBF16:
      return CUDA_R_16BF;
    case GemmType::kFP8:
      return CUDA_R_8F_E4M3;
    case GemmType::kF32:
      break;
  }
  return CUDA_R_32F;
}

std::string ShapeName(GemmType in, int64_t m, int n, int k) {
  const char* type = in == GemmType::kF32 ? "fp32" : in == GemmType::kBF16 ? "bf16" : "fp8";
  return std::string(type) + " gemm m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k);
}

}  // namespace

Result<std::unique_ptr<Gemm>> Gemm::Create(const Options& options) {
  std::unique_ptr<Gemm> g(new Gemm());
  g->options_ = options;
  cublasLtHandle_t handle = nullptr;
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  g->handle_ = handle;
  if (options.workspace_bytes > 0) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&g->workspace_, options.workspace_bytes));
  }
  return g;
}

Gemm::~Gemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (flush_ != nullptr) cudaFree(flush_);
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

Result<Gemm::Plan*> Gemm::GetPlan(GemmType in, GemmType out_type, int64_t m, int n, int k) {
  const Key key{static_cast<int>(in), static_cast<int>(out_type), m, n, k};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute = in == GemmType::kF32 && options_.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  if (in == GemmType::kFP8) {
    // A (the weights) in 128 x 128 blocks, B (the activations) in 1 x 128 blocks along k.
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    // The heuristic answers INVALID_VALUE while the scale pointers are unset; any aligned
    // device address serves until RunFp8 sets the real ones.
    const void* placeholder = workspace_;
    SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)));
    SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)));
  }
  // A = w: column-major k x n (ld k), used transposed; B = x: column-major k x m (ld k);
  // C = out: column-major n x m (ld n).
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->a, CudaType(in), k, n, k));
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->b, CudaType(in), k, m, k));
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->c, CudaType(out_type), n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = options_.workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  constexpr int kCandidates = 32;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->desc, plan->a,
                                     plan->b, plan->c, plan->c, pref, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    return InternalError("cuBLASLt has no algorithm for " + ShapeName(in, m, n, k) + " (status " +
                         std::to_string(static_cast<int>(st)) + ")");
  }
  plan->algo = results[0].algo;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates.push_back(results[i].algo);
  }
  // Only skinny (decode) shapes are worth timing: the heuristic's first pick for them often
  // leaves most SMs idle; large GEMMs keep it.
  plan->tuned = !options_.autotune || m > 64 || plan->candidates.size() < 2;
  if (!plan->tuned) AddSplitKCandidates(*plan);
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

// A skinny output (32 rows x 4096 columns: 32 tiles of 128 columns on 132 SMs) leaves most SMs
// idle unless k is split too; the heuristic's candidates rarely do. Adds each of the first 8
// candidates that allows it split 2, 4 and 8 ways (partial sums reduced in the workspace or the
// output, as the algorithm supports), for Tune to time with the rest.
void Gemm::AddSplitKCandidates(Plan& plan) {
  auto handle = static_cast<cublasLtHandle_t>(handle_);
  const size_t heuristic = std::min<size_t>(plan.candidates.size(), 8);
  for (size_t i = 0; i < heuristic; ++i) {
    const cublasLtMatmulAlgo_t base = plan.candidates[i];
    int32_t splittable = 0, splits = 1;
    uint32_t schemes = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splittable,
                                          sizeof(splittable), &written) != CUBLAS_STATUS_SUCCESS ||
        splittable == 0 ||
        cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                          sizeof(schemes), &written) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigGetAttribute(&base, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                             sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS ||
        splits != 1) {
      continue;
    }
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    for (uint32_t s : {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                       CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, CUBLASLT_REDUCTION_SCHEME_INPLACE}) {
      if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE && (schemes & s) == s) scheme = s;
    }
    if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE) continue;
    for (int32_t k_splits : {2, 4, 8}) {
      cublasLtMatmulAlgo_t algo = base;
      cublasLtMatmulHeuristicResult_t check = {};
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k_splits,
                                               sizeof(k_splits)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &scheme, sizeof(scheme)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoCheck(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo,
                                  &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= options_.workspace_bytes) {
        plan.candidates.push_back(algo);
      }
    }
  }
}

Status Gemm::Run(GemmType in, GemmType out_type, const void* x, int64_t m, int k, const void* w,
                 int n, void* out, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return Status::Ok();
  if (in == GemmType::kF32 && out_type != GemmType::kF32) {
    return InvalidArgumentError("gemm: fp32 inputs need an fp32 output");
  }
  if (k <= 0) {
    const size_t bytes = static_cast<size_t>(m) * n * (out_type == GemmType::kF32 ? 4 : 2);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, bytes, stream));
    return Status::Ok();
  }
  if (in == GemmType::kFP8) return InvalidArgumentError("gemm: fp8 inputs go through RunFp8");
  SPARK_ASSIGN_OR_RETURN(Plan * plan, GetPlan(in, out_type, m, n, k));
  return Launch(*plan, ShapeName(in, m, n, k), x, w, out, stream);
}

const Status& Gemm::CheckFp8(int64_t m, int n, int k) {
  // The answer is kept per shape (a shape cuBLASLt has no algorithm for keeps no plan), so the
  // engine may ask on every call.
  const auto key = std::make_tuple(m, n, k);
  if (auto it = fp8_support_.find(key); it != fp8_support_.end()) return it->second;
  Status s;
  if (m <= 0 || m % 16 != 0 || k % 512 != 0 || n % 128 != 0) {
    s = UnimplementedError("block-scaled " + ShapeName(GemmType::kFP8, m, n, k) +
                           ": needs m a multiple of 16, k of 512 and n of 128");
  } else if (Result<Plan*> plan = GetPlan(GemmType::kFP8, GemmType::kF32, m, n, k); !plan.ok()) {
    s = UnimplementedError(plan.status().message() + " (block-scaled FP8 GEMMs are Hopper's)");
  }
  return fp8_support_.emplace(key, std::move(s)).first->second;
}

Status Gemm::RunFp8(const void* x, const float* x_scales, int64_t m, int k, const void* w,
                    const float* w_scales, int n, float* out, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return Status::Ok();
  SPARK_RETURN_IF_ERROR(CheckFp8(m, n, k));
  SPARK_ASSIGN_OR_RETURN(Plan * plan, GetPlan(GemmType::kFP8, GemmType::kF32, m, n, k));
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)));
  SPARK_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)));
  return Launch(*plan, ShapeName(GemmType::kFP8, m, n, k), x, w, out, stream);
}

Status Gemm::Launch(Plan& plan, const std::string& what, const void* x, const void* w, void* out,
                    cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capturing));
  if (!plan.tuned && capturing == cudaStreamCaptureStatusNone) {
    SPARK_RETURN_IF_ERROR(Tune(plan, what, x, w, out, stream));
  }
  const cublasStatus_t st = cublasLtMatmul(
      static_cast<cublasLtHandle_t>(handle_), plan.desc, &alpha, w, plan.a, x, plan.b, &beta, out,
      plan.c, out, plan.c, &plan.algo, workspace_, options_.workspace_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return InternalError("cuBLASLt matmul failed for " + what + " (status " +
                         std::to_string(static_cast<int>(st)) + ")");
  }
  return Status::Ok();
}

// Each candidate: one warm-up run, then three runs each after the L2 cache was overwritten, so
// the weights come from memory as in a decode step. The output is rewritten by the caller.
Status Gemm::Tune(Plan& plan, const std::string& what, const void* x, const void* w, void* out,
                  cudaStream_t stream) {
  const bool log = GetLaunchSettings().log_gemm_tuning;
  if (flush_ == nullptr) {
    int device = 0, l2 = 0;
    SPARK_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    SPARK_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    flush_bytes_ = std::max<size_t>(size_t{2} * l2, size_t{8} << 20);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&flush_, flush_bytes_));
  }
  constexpr int kRuns = 3;
  cudaEvent_t events[2 * kRuns];
  for (cudaEvent_t& e : events) SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  const float alpha = 1.0f, beta = 0.0f;
  float best = -1;
  for (const cublasLtMatmulAlgo_t& algo : plan.candidates) {
    auto run = [&] {
      return cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan.desc, &alpha, w, plan.a, x,
                            plan.b, &beta, out, plan.c, out, plan.c, &algo, workspace_,
                            options_.workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
    };
    bool ok = run();
    for (int r = 0; r < kRuns && ok; ++r) {
      ok = cudaMemsetAsync(flush_, r + 1, flush_bytes_, stream) == cudaSuccess;
      cudaEventRecord(events[2 * r], stream);
      ok = ok && run();
      cudaEventRecord(events[2 * r + 1], stream);
    }
    if (!ok || cudaEventSynchronize(events[2 * kRuns - 1]) != cudaSuccess) continue;
    float total = 0;
    for (int r = 0; r < kRuns; ++r) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]);
      total += ms;
    }
    if (log) {
      int32_t id = 0, tile = 0, splits = 0;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                           &written);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile),
                                           &written);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written);
      std::fprintf(stderr, "gemm tune %s: algo %d tile %d split-k %d: %.2f us\n", what.c_str(), id,
                   tile, splits, 1e3 * total / kRuns);
    }
    if (best < 0 || total < best) {
      best = total;
      plan.algo = algo;
    }
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  cudaGetLastError();  // a candidate that failed to launch leaves its error behind
  plan.tuned = true;
  return Status::Ok();
}

}  // namespace spark::kernels
