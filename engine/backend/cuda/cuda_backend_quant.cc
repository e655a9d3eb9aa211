// CudaBackend's Linear over DeepSeek's released weight types (kE4M3B32, kE2M1B32): up to
// kernels::kQuantGemmMaxRows rows the weights are decoded in registers by kernels::QuantGemm (a
// decode step reads each weight byte once); more rows widen them once into bf16 scratch for the
// cuBLAS GEMM.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "kernels/elementwise.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda {

Result<CudaBackend::Bf16Parts> CudaBackend::Bf16Rows(Input x, int64_t rows, int cols,
                                                     Buffer* scratch) {
  const bool split = options_.precise_quant;
  if (const __nv_bfloat16* copy = internal::Bf16(x); copy != nullptr && !split) {
    return Bf16Parts{copy, nullptr};
  }
  const size_t count = static_cast<size_t>(rows) * cols;
  SPARK_ASSIGN_OR_RETURN(*scratch, Scratch(count * (split ? 4 : 2), DType::kBF16));
  auto* hi = static_cast<__nv_bfloat16*>(scratch->raw());
  __nv_bfloat16* lo = split ? hi + count : nullptr;
  if (launching()) {
    if (split) {
      SPARK_RETURN_IF_ERROR(kernels::SplitBf16(x.data, count, hi, lo, stream_));
    } else {
      SPARK_RETURN_IF_ERROR(kernels::CastF32ToBf16(x.data, count, hi, stream_));
    }
  }
  return Bf16Parts{hi, lo};
}

Result<WeightRef> CudaBackend::WidenQuant(WeightRef w, int n, int k, Buffer* scratch) {
  const kernels::QuantMatrix m = internal::QuantView(w, n, k);
  const size_t count = static_cast<size_t>(n) * k;
  if (options_.precise_quant) {
    SPARK_ASSIGN_OR_RETURN(*scratch, Scratch(count * 4));
    if (launching()) SPARK_RETURN_IF_ERROR(kernels::DequantToF32(m, scratch->data(), stream_));
  } else {
    SPARK_ASSIGN_OR_RETURN(*scratch, Scratch(count * 2, DType::kBF16));
    if (launching()) {
      SPARK_RETURN_IF_ERROR(
          kernels::DequantToBf16(m, static_cast<__nv_bfloat16*>(scratch->raw()), stream_));
    }
  }
  return scratch->weight();
}

Status CudaBackend::LinearQuant(Input x, int64_t rows, int in_features, WeightRef w,
                                int out_features, float* out, bool accumulate) {
  if (rows <= kernels::kQuantGemmMaxRows) {
    Buffer xb_scratch, split_scratch;
    SPARK_ASSIGN_OR_RETURN(const Bf16Parts xb, Bf16Rows(x, rows, in_features, &xb_scratch));
    kernels::QuantGemmArgs a;
    a.single = internal::QuantView(w, out_features, in_features);
    a.k_splits = kernels::QuantGemmKSplits(a.single, rows);
    if (a.k_splits > 1) {
      SPARK_ASSIGN_OR_RETURN(split_scratch,
                             Scratch(static_cast<size_t>(a.k_splits) * rows * out_features * 4));
      a.split_out = split_scratch.data();
    }
    if (!launching()) return Status::Ok();
    a.tokens = rows;
    a.x = xb.hi;
    a.x_lo = xb.lo;
    a.ldx = in_features;
    a.ldo = out_features;
    a.out = out;
    a.accumulate = accumulate;
    return kernels::QuantGemm(a, stream_);
  }
  Buffer widened;
  SPARK_ASSIGN_OR_RETURN(const WeightRef wide, WidenQuant(w, out_features, in_features, &widened));
  if (!accumulate) return LinearImpl(x, rows, in_features, wide, out_features, out);
  SPARK_ASSIGN_OR_RETURN(Buffer sum, Scratch(static_cast<size_t>(rows) * out_features * 4));
  SPARK_RETURN_IF_ERROR(LinearImpl(x, rows, in_features, wide, out_features, sum.data()));
  if (!launching()) return Status::Ok();
  return kernels::Add<float>(out, sum.data(), static_cast<size_t>(rows) * out_features, stream_);
}

}  // namespace spark::engine::backend::cuda
