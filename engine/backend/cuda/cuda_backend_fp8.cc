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

Status CudaBackend::LinearFp8(const float* x, int64_t rows, int in_features, WeightRef w,
                              int out_features, float* out) {
  // From the first fp8 Linear on, norms write the bf16 copies the widened path below takes
  // (decode rows, which the GEMV serves, never make one).
  bf16_weights_ = true;
  const size_t count = static_cast<size_t>(out_features) * in_features;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const float* scales = Fp8Scales(w.data, count);
  if (UseFp8Gemv(rows, out_features, in_features)) {
    if (!launching()) return Status::Ok();
    return kernels::GemvFp8(x, rows, in_features, codes, scales, out_features, out, stream_);
  }
  const int64_t padded = PaddedRows(rows);
  if (gemm_->SupportsFp8(padded, out_features, in_features)) {
    SPARK_ASSIGN_OR_RETURN(Buffer xq, QuantizeForFp8(x, rows, padded, in_features));
    return Fp8Gemm(xq, rows, padded, in_features, w, out_features, out);
  }
  // The weights widened to bf16 (a pass over them, small next to a GEMM of many rows), then
  // the bf16 tensor-core path.
  SPARK_ASSIGN_OR_RETURN(Buffer widened, Scratch(count * 2, DType::kBF16));
  if (launching()) {
    SPARK_RETURN_IF_ERROR(kernels::DequantFp8ToBf16(codes, scales, out_features, in_features,
                                                    static_cast<__nv_bfloat16*>(widened.raw()),
                                                    stream_));
  }
  return LinearImpl(x, rows, in_features, widened.weight(), out_features, out);
}

bool CudaBackend::UseFp8Gemv(int64_t rows, int n, int k) {
  if (rows > kernels::kGemvMaxRows || k % 16 != 0) return false;
  return rows == 1 || !gemm_->SupportsFp8(PaddedRows(rows), n, k);
}

bool CudaBackend::LinearManyFp8(const float* x, int64_t rows, int in_features,
                                std::span<const LinearOut> outs) {
  const int64_t padded = PaddedRows(rows);
  for (const LinearOut& o : outs) {
    if (!gemm_->SupportsFp8(padded, o.out_features, in_features)) return false;
  }
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(Buffer xq, QuantizeForFp8(x, rows, padded, in_features));
    for (const LinearOut& o : outs) {
      SPARK_RETURN_IF_ERROR(Fp8Gemm(xq, rows, padded, in_features, o.w, o.out_features, o.out));
    }
    return Status::Ok();
  }();
  Record(s);
  return true;
}

Result<Buffer> CudaBackend::QuantizeForFp8(const float* x, int64_t rows, int64_t padded, int k) {
  const size_t codes = static_cast<size_t>(padded) * k, bytes = codes + 4 * codes / kFp8Block;
  SPARK_ASSIGN_OR_RETURN(Buffer xq, Scratch(bytes));
  if (!launching()) return xq;
  auto* x_codes = static_cast<uint8_t*>(xq.raw());
  if (padded != rows) SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x_codes, 0, bytes, stream_));
  SPARK_RETURN_IF_ERROR(kernels::QuantizeRowsFp8(
      x, rows, k, x_codes, reinterpret_cast<float*>(x_codes + codes), padded, stream_));
  return xq;
}

Status CudaBackend::Fp8Gemm(const Buffer& xq, int64_t rows, int64_t padded, int k, WeightRef w,
                            int n, float* out) {
  Buffer wide;  // the padded output, when there are padding rows
  if (padded != rows) {
    SPARK_ASSIGN_OR_RETURN(wide, Scratch(static_cast<size_t>(padded) * n * 4));
  }
  if (!launching()) return Status::Ok();
  const auto* x_codes = static_cast<const uint8_t*>(xq.raw());
  const auto* x_scales = reinterpret_cast<const float*>(x_codes + static_cast<size_t>(padded) * k);
  float* dst = padded != rows ? wide.data() : out;
  SPARK_RETURN_IF_ERROR(
      gemm_->RunFp8(x_codes, x_scales, padded, k, static_cast<const uint8_t*>(w.data),
                    Fp8Scales(w.data, static_cast<size_t>(n) * k), n, dst, stream_));
  if (padded == rows) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, dst, static_cast<size_t>(rows) * n * 4,
                                             cudaMemcpyDeviceToDevice, stream_));
  return Status::Ok();
}

}  // namespace spark::engine::backend::cuda
