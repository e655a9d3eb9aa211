// CudaBackend's Linear over fp8 weights (E4M3 with 128 x 128 block scales, backend.h): the
// GEMV for decode rows, cuBLASLt's block-scaled FP8 GEMM for more rows where it exists
// (Hopper), and otherwise the bf16 GEMM over the weights widened into scratch (GB10).
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/fp8.h"
#include "kernels/gemv.h"

namespace spark::engine::backend::cuda {
namespace {

// cuBLASLt takes multiples of 16 rows: padding rows are zero (codes and scales) and their
// outputs are dropped.
int64_t PaddedRows(int64_t rows) { return (rows + 15) / 16 * 16; }

}  // namespace

Status CudaBackend::LinearFp8(Input x, int64_t rows, int in_features, WeightRef w,
                              int out_features, float* out) {
  const size_t count = static_cast<size_t>(out_features) * in_features;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const float* scales = Fp8Scales(w.data, count);
  if (UseFp8Gemv(rows, out_features, in_features)) {
    if (!launching()) return Status::Ok();
    return kernels::GemvFp8(x.data, rows, in_features, codes, scales, out_features, out, stream_);
  }
  if (HasFp8Gemm(rows, out_features, in_features)) {
    const LinearOut one{w, out_features, out};
    return Fp8Gemms(x.data, rows, in_features, {&one, 1});
  }
  // The weights widened to bf16 (a pass over them, small next to a GEMM of many rows), then
  // the bf16 tensor-core path (over the input's bf16 copy when the op before wrote one).
  SPARK_ASSIGN_OR_RETURN(Buffer widened, Scratch(count * 2, DType::kBF16));
  if (launching()) {
    SPARK_RETURN_IF_ERROR(kernels::DequantFp8ToBf16(codes, scales, out_features, in_features,
                                                    static_cast<__nv_bfloat16*>(widened.raw()),
                                                    stream_));
  }
  return LinearImpl(x, rows, in_features, widened.weight(), out_features, out);
}

bool CudaBackend::HasFp8Gemm(int64_t rows, int n, int k) {
  return gemm_->SupportsFp8(PaddedRows(rows), n, k);
}

bool CudaBackend::UseFp8Gemv(int64_t rows, int n, int k) {
  if (rows > kernels::kGemvMaxRows || k % 16 != 0) return false;
  return rows == 1 || !HasFp8Gemm(rows, n, k);
}

Status CudaBackend::Fp8Gemms(const float* x, int64_t rows, int k, std::span<const LinearOut> outs) {
  // x quantised once into scratch: [padded, k] E4M3 codes, then the scales [k / 128, padded];
  // padding rows zero.
  const int64_t padded = PaddedRows(rows);
  const size_t n_codes = static_cast<size_t>(padded) * k, bytes = n_codes + 4 * n_codes / kFp8Block;
  SPARK_ASSIGN_OR_RETURN(Buffer xq, Scratch(bytes));
  auto* x_codes = static_cast<uint8_t*>(xq.raw());
  auto* x_scales = reinterpret_cast<float*>(x_codes + n_codes);
  if (launching()) {
    if (padded != rows) SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x_codes, 0, bytes, stream_));
    SPARK_RETURN_IF_ERROR(kernels::QuantizeRowsFp8(x, rows, k, x_codes, x_scales, padded, stream_));
  }
  for (const LinearOut& o : outs) {
    Buffer wide;  // the padded output, when there are padding rows
    if (padded != rows) {
      SPARK_ASSIGN_OR_RETURN(wide, Scratch(static_cast<size_t>(padded) * o.out_features * 4));
    }
    if (!launching()) continue;
    float* dst = padded != rows ? wide.data() : o.out;
    SPARK_RETURN_IF_ERROR(
        gemm_->RunFp8(x_codes, x_scales, padded, k, static_cast<const uint8_t*>(o.w.data),
                      Fp8Scales(o.w.data, static_cast<size_t>(o.out_features) * k), o.out_features,
                      dst, stream_));
    if (padded != rows) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(o.out, dst,
                                                 static_cast<size_t>(rows) * o.out_features * 4,
                                                 cudaMemcpyDeviceToDevice, stream_));
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::backend::cuda
