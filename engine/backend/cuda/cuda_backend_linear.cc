// CudaBackend's Linear family: the GEMV for decode rows over bf16 or fp8 weights, cuBLASLt
// otherwise (cuda_backend_fp8.cc for fp8 weights past the GEMV), and the fused forms the models
// call: several outputs of one input, gate/up with SiLU-mul, and an output projection added into
// the residual stream (with the next norm).
#include <algorithm>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "kernels/elementwise.h"
#include "kernels/gemv.h"
#include "kernels/launch_settings.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda {

using internal::Bf16;

bool CudaBackend::ByGemv(int64_t rows, int n, int k, DType dtype) {
  if (dtype == DType::kFP8) return UseFp8Gemv(rows, n, k);
  return dtype == DType::kBF16 && rows <= kernels::GetLaunchSettings().gemv_max_rows &&
         k % 8 == 0;
}

void CudaBackend::Linear(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                         float* out) {
  Activate();
  Record(LinearImpl(x, rows, in_features, w, out_features, out));
}

Status CudaBackend::LinearImpl(Input x, int64_t rows, int in_features, WeightRef w,
                               int out_features, float* out) {
  using kernels::GemmType;
  if (w.dtype == DType::kFP8) return LinearFp8(x, rows, in_features, w, out_features, out);
  if (IsQuantised(w.dtype)) {
    return LinearQuant(x, rows, in_features, w, out_features, out, /*accumulate=*/false);
  }
  if (w.dtype == DType::kF32) {
    if (!launching()) return Status::Ok();
    return gemm_->Run(GemmType::kF32, GemmType::kF32, x.data, rows, in_features, w.data,
                      out_features, out, stream_);
  }
  if (ByGemv(rows, out_features, in_features, w.dtype)) {
    return Gemv(x.data, rows, in_features, w, out_features, out, /*accumulate=*/false);
  }
  if (options_.precise_quant) {
    // fp32 activations: the bf16 weights widened (exactly) for the fp32 GEMM.
    const size_t count = static_cast<size_t>(out_features) * in_features;
    SPARK_ASSIGN_OR_RETURN(Buffer wide, Scratch(count * 4));
    if (!launching()) return Status::Ok();
    SPARK_RETURN_IF_ERROR(kernels::CastBf16ToF32(static_cast<const __nv_bfloat16*>(w.data), count,
                                                 wide.data(), stream_));
    return gemm_->Run(GemmType::kF32, GemmType::kF32, x.data, rows, in_features, wide.data(),
                      out_features, out, stream_);
  }
  // Tensor cores: the activations rounded to bf16 (by the op that wrote them, or here), fp32
  // accumulation and output.
  const auto* wb = static_cast<const __nv_bfloat16*>(w.data);
  if (const __nv_bfloat16* copy = Bf16(x)) {
    if (!launching()) return Status::Ok();
    return gemm_->Run(GemmType::kBF16, GemmType::kF32, copy, rows, in_features, wb, out_features,
                      out, stream_);
  }
  const size_t count = static_cast<size_t>(rows) * in_features;
  SPARK_ASSIGN_OR_RETURN(Buffer xb, Scratch(count * 2));
  if (!launching()) return Status::Ok();
  auto* xh = reinterpret_cast<__nv_bfloat16*>(xb.data());
  SPARK_RETURN_IF_ERROR(kernels::CastF32ToBf16(x.data, count, xh, stream_));
  return gemm_->Run(GemmType::kBF16, GemmType::kF32, xh, rows, in_features, wb, out_features, out,
                    stream_);
}

Status CudaBackend::Gemv(const float* x, int64_t rows, int in_features, WeightRef w,
                         int out_features, float* out, bool accumulate) {
  if (!launching()) return Status::Ok();
  kernels::GemvSegments segs;
  segs.count = 1;
  segs.w[0] = w.data;
  segs.out[0] = out;
  segs.n[0] = out_features;
  segs.accumulate = accumulate;
  if (w.dtype == DType::kFP8) {
    segs.scales[0] = Fp8Scales(w.data, static_cast<size_t>(out_features) * in_features);
    return kernels::GemvFp8Many(x, rows, in_features, segs, stream_);
  }
  return kernels::GemvBf16Many(x, rows, in_features, segs, stream_);
}

void CudaBackend::LinearMany(Input x, int64_t rows, int in_features,
                             std::span<const LinearOut> outs) {
  bool bf16 = !outs.empty(), fp8 = !outs.empty(), fp8_gemv = true;
  for (const LinearOut& o : outs) {
    bf16 = bf16 && o.w.dtype == DType::kBF16;
    fp8 = fp8 && o.w.dtype == DType::kFP8;
    fp8_gemv = fp8 && fp8_gemv && UseFp8Gemv(rows, o.out_features, in_features);
  }
  const bool one_launch = ((bf16 && in_features % 8 == 0 &&
                            rows <= kernels::GetLaunchSettings().gemv_max_rows) ||
                           fp8_gemv) &&
                          rows <= kernels::kGemvMaxRows &&
                          outs.size() <= static_cast<size_t>(kernels::kGemvMaxSegments);
  if (fp8 && !one_launch &&
      std::all_of(outs.begin(), outs.end(), [&](const LinearOut& o) {
        return HasFp8Gemm(rows, o.out_features, in_features);
      })) {
    Activate();
    Record(Fp8Gemms(x.data, rows, in_features, outs));
    return;
  }
  if (!one_launch) return Backend::LinearMany(x, rows, in_features, outs);
  Activate();
  if (!launching()) return;
  kernels::GemvSegments segs;
  for (const LinearOut& o : outs) {
    segs.w[segs.count] = o.w.data;
    if (fp8) segs.scales[segs.count] = Fp8Scales(o.w.data, size_t(o.out_features) * in_features);
    segs.out[segs.count] = o.out;
    segs.n[segs.count++] = o.out_features;
  }
  Record(fp8 ? kernels::GemvFp8Many(x.data, rows, in_features, segs, stream_)
             : kernels::GemvBf16Many(x.data, rows, in_features, segs, stream_));
}

void CudaBackend::LinearSiluMul(Input x, int64_t rows, int in_features, WeightRef w, int inter,
                                float* gate_up, Output act) {
  if (!ByGemv(rows, 2 * inter, in_features, w.dtype)) {
    return Backend::LinearSiluMul(x, rows, in_features, w, inter, gate_up, act);
  }
  Activate();
  if (!launching()) return;
  if (w.dtype == DType::kFP8) {
    const auto* codes = static_cast<const uint8_t*>(w.data);
    const float* scales = Fp8Scales(w.data, size_t(2) * inter * in_features);
    Record(kernels::GemvFp8SiluMul(x.data, rows, in_features, codes, scales, inter, act.data,
                                   stream_));
  } else {
    Record(kernels::GemvBf16SiluMul(x.data, rows, in_features,
                                    static_cast<const __nv_bfloat16*>(w.data), inter, act.data,
                                    stream_));
  }
  if (act.bf16 != nullptr) {  // the GEMV writes fp32 only; an asked-for copy is made here
    Record(kernels::CastF32ToBf16(act.data, static_cast<size_t>(rows) * inter, Bf16(act), stream_));
  }
}

void CudaBackend::LinearAdd(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                            float* scratch, float* h) {
  if (IsQuantised(w.dtype) && rows <= kernels::kQuantGemmMaxRows) {
    Activate();  // the kernel adds into h as it stores
    Record(LinearQuant(x, rows, in_features, w, out_features, h, /*accumulate=*/true));
    return;
  }
  if (!ByGemv(rows, out_features, in_features, w.dtype)) {
    return Backend::LinearAdd(x, rows, in_features, w, out_features, scratch, h);
  }
  // The GEMV stores the old value plus its sum: no delta buffer, no add kernel.
  Activate();
  Record(Gemv(x.data, rows, in_features, w, out_features, h, /*accumulate=*/true));
}

void CudaBackend::LinearAddRmsNorm(Input x, int64_t rows, int in_features, WeightRef w,
                                   int out_features, float* scratch, float* h, const float* norm,
                                   float eps, Output out) {
  if (!ByGemv(rows, out_features, in_features, w.dtype)) {
    // A GEMM into scratch, then the add and the norm in one kernel.
    return Backend::LinearAddRmsNorm(x, rows, in_features, w, out_features, scratch, h, norm, eps,
                                     out);
  }
  LinearAdd(x, rows, in_features, w, out_features, scratch, h);
  RmsNorm(h, norm, rows, out_features, eps, out);
}

}  // namespace spark::engine::backend::cuda
