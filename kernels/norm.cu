// RMSNorm kernels: one block per row, fp32 sums, 16-byte vector accesses when the row allows.
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/norm.h"

namespace spark::kernels {
namespace {

using detail::Aligned16;
using detail::FromFloat;
using detail::ToFloat;

using detail::Vec;

// The row is read twice (sum of squares, then scale); the second read comes from L1/L2.
template <typename T, int kVec>
__global__ void RmsNormKernel(const T* __restrict__ x, T* residual, const T* __restrict__ weight,
                              int dim, float eps, T* out, __nv_bfloat16* out_bf16) {
  detail::LetSuccessorLaunchThenWait();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int chunks = dim / kVec;
  const Vec<T, kVec>* xr = reinterpret_cast<const Vec<T, kVec>*>(x + row * dim);
  Vec<T, kVec>* rr = residual ? reinterpret_cast<Vec<T, kVec>*>(residual + row * dim) : nullptr;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    Vec<T, kVec> v = xr[c];
    if (rr != nullptr) {
      const Vec<T, kVec> r = rr[c];
#pragma unroll
      for (int i = 0; i < kVec; ++i) v.v[i] = FromFloat<T>(ToFloat(v.v[i]) + ToFloat(r.v[i]));
      rr[c] = v;
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) sum += ToFloat(v.v[i]) * ToFloat(v.v[i]);
  }
  sum = detail::BlockSum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(dim) + eps);
  const Vec<T, kVec>* src = rr != nullptr ? rr : xr;
  const Vec<T, kVec>* w = reinterpret_cast<const Vec<T, kVec>*>(weight);
  Vec<T, kVec>* o = reinterpret_cast<Vec<T, kVec>*>(out + row * dim);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const Vec<T, kVec> v = src[c], wv = w[c];
    Vec<T, kVec> r;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      r.v[i] = FromFloat<T>(ToFloat(wv.v[i]) * (ToFloat(v.v[i]) * inv));
    o[c] = r;
    if (out_bf16 != nullptr) {
      __nv_bfloat16* ob = out_bf16 + row * dim + int64_t{c} * kVec;
      if constexpr (kVec == 4) {
        detail::StoreBf16x4(ob, ToFloat(r.v[0]), ToFloat(r.v[1]), ToFloat(r.v[2]), ToFloat(r.v[3]));
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) ob[i] = __float2bfloat16_rn(ToFloat(r.v[i]));
      }
    }
  }
}

}  // namespace

template <typename T>
Status RmsNorm(const T* x, T* residual, const T* weight, int64_t rows, int dim, float eps, T* out,
               cudaStream_t stream, __nv_bfloat16* out_bf16) {
  if (rows <= 0) return Status::Ok();
  constexpr int kVec = 16 / sizeof(T);
  const bool vector = dim % kVec == 0 && Aligned16(x) && Aligned16(weight) && Aligned16(out) &&
                      (residual == nullptr || Aligned16(residual)) &&
                      (out_bf16 == nullptr || Aligned16(out_bf16));
  const int chunks = vector ? dim / kVec : dim;
  const int threads = chunks >= 1024 ? 1024 : (chunks + 31) / 32 * 32;
  SPARK_CUDA_RETURN_IF_ERROR(
      detail::LaunchDependent(vector ? RmsNormKernel<T, kVec> : RmsNormKernel<T, 1>, rows, threads,
                              0, stream, x, residual, weight, dim, eps, out, out_bf16));
  return Status::Ok();
}

template Status RmsNorm<float>(const float*, float*, const float*, int64_t, int, float, float*,
                               cudaStream_t, __nv_bfloat16*);
template Status RmsNorm<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                       int64_t, int, float, __nv_bfloat16*, cudaStream_t,
                                       __nv_bfloat16*);

}  // namespace spark::kernels
