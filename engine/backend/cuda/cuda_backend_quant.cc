// CudaBackend's Linear over DeepSeek's released weight types (kE4M3B32, kE2M1B32): up to
// kernels::kQuantGemmMaxRows rows the weights are decoded in registers by kernels::QuantGemm (a
// decode step reads each weight byte once); more rows widen them once into bf16 scratch for the
// cuBLAS GEMM.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "kernels/elementwise.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda {

Result<const __nv_bfloat16*> CudaBackend::Bf16Rows(Input x, int64_t rows, int cols,
                                                   Buffer* scratch) {
  if (const __nv_bfloat16* copy = internal::Bf16(x)) return copy;
  const size_t count = static_cast<size_t>(rows) * cols;
  SPARK_ASSIGN_OR_RETURN(*scratch, Scratch(count * 2, DType::kBF16));
  auto* xb = static_cast<__nv_bfloat16*>(scratch->raw());
  if (launching()) SPARK_RETURN_IF_ERROR(kernels::CastF32ToBf16(x.data, count, xb, stream_));
  return static_cast<const __nv_bfloat16*>(xb);
}

Status CudaBackend::LinearQuant(Input x, int64_t rows, int in_features, WeightRef w,
                                int out_features, float* out, bool accumulate) {
  const kernels::QuantMatrix m = internal::QuantView(w, out_features, in_features);
  if (rows <= kernels::kQuantGemmMaxRows) {
    Buffer xb_scratch;
    SPARK_ASSIGN_OR_RETURN(const __nv_bfloat16* xb, Bf16Rows(x, rows, in_features, &xb_scratch));
    if (!launching()) return Status::Ok();
    kernels::QuantGemmArgs a;
    a.single = m;
    a.tokens = rows;
    a.x = xb;
    a.ldx = in_features;
    a.ldo = out_features;
    a.out = out;
    a.accumulate = accumulate;
    return kernels::QuantGemm(a, stream_);
  }
  const size_t count = static_cast<size_t>(out_features) * in_features;
  SPARK_ASSIGN_OR_RETURN(Buffer widened, Scratch(count * 2, DType::kBF16));
  if (launching()) {
    SPARK_RETURN_IF_ERROR(kernels::DequantToBf16(
        m, static_cast<__nv_bfloat16*>(widened.raw()), stream_));
  }
  if (!accumulate) return LinearImpl(x, rows, in_features, widened.weight(), out_features, out);
  SPARK_ASSIGN_OR_RETURN(Buffer sum, Scratch(static_cast<size_t>(rows) * out_features * 4));
  SPARK_RETURN_IF_ERROR(
      LinearImpl(x, rows, in_features, widened.weight(), out_features, sum.data()));
  if (!launching()) return Status::Ok();
  return kernels::Add<float>(out, sum.data(), static_cast<size_t>(rows) * out_features, stream_);
}

}  // namespace spark::engine::backend::cuda
