// RoPE: the host-side frequency table (plain and YaRN) and the in-place rotation kernel.
#include <algorithm>
#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/rope.h"

namespace spark::kernels {
namespace {

using detail::FromFloat;
using detail::ToFloat;

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The dimension whose wavelength makes `rotations` turns over the original context.
double CorrectionDim(double rotations, int dim, double base, int max_position) {
  return dim * std::log(max_position / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

// One block per token; a thread per (head, pair), looping when heads * half > blockDim.
template <typename T>
__global__ void RopeKernel(T* x, const int32_t* __restrict__ positions, int heads, int head_dim,
                           const float* __restrict__ inv_freq, float attention_factor) {
  const int64_t t = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);
    c *= attention_factor;
    s *= attention_factor;
    T* v = x + (t * heads + h) * head_dim;
    const float a = ToFloat(v[i]), b = ToFloat(v[i + half]);
    v[i] = FromFloat<T>(a * c - b * s);
    v[i + half] = FromFloat<T>(b * c + a * s);
  }
}

// Per-head RMSNorm and RoPE of one head held by one warp (NormRopeLane): lane l's elements
// [kE*l, kE*l + kE) read at `in` and written at `v` (may be the same). `copy`, when set,
// receives the result too (a KV cache row).
template <int kE, typename C>
__device__ __forceinline__ void NormRopeHead(const float* in, float* v, C* copy,
                                             const float* weight, float eps, float pos,
                                             const float* __restrict__ inv_freq, int lane) {
  float a[kE];
#pragma unroll
  for (int i = 0; i < kE; ++i) a[i] = in[i];
  detail::NormRopeLane<kE>(a, weight, eps, pos, inv_freq, lane);
#pragma unroll
  for (int i = 0; i < kE; ++i) {
    v[i] = a[i];
    if (copy != nullptr) copy[i] = FromFloat<C>(a[i]);
  }
}

// One warp per (token, head) of q, of k and of v: q and k normed and rotated in place (or from
// the stacked rows at p.src), k and v rows also written to their cache slot (of element type C).
template <int kE, typename C>
__global__ void QkNormRopeWriteKvKernel(QkvHeads p, const int32_t* __restrict__ positions,
                                        const int64_t* __restrict__ slots, int64_t tokens,
                                        float eps, const float* __restrict__ inv_freq) {
  detail::LetSuccessorLaunchThenWait();
  constexpr int kDim = 32 * kE;
  const int lane = threadIdx.x % 32;
  const int per_token = p.heads + 2 * p.kv_heads;
  const int64_t row = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (row >= tokens * per_token) return;
  const int64_t t = row / per_token;
  const int j = static_cast<int>(row % per_token);
  const float pos = static_cast<float>(positions[t]);
  const int64_t kv_width = int64_t{p.kv_heads} * kDim;
  // Head j's elements of this lane in the stacked row (q, then k, then v heads), if there is one.
  const float* stacked =
      p.src != nullptr ? p.src + t * p.src_stride + j * kDim + lane * kE : nullptr;
  if (j < p.heads) {
    float* q = p.q + (t * p.heads + j) * kDim + lane * kE;
    NormRopeHead<kE, C>(stacked != nullptr ? stacked : q, q, nullptr, p.q_weight, eps, pos,
                        inv_freq, lane);
    return;
  }
  const int64_t at =
      (j < p.heads + p.kv_heads ? j - p.heads : j - p.heads - p.kv_heads) * kDim + lane * kE;
  if (j < p.heads + p.kv_heads) {
    float* k = p.k + t * kv_width + at;
    NormRopeHead<kE, C>(stacked != nullptr ? stacked : k, k,
                        static_cast<C*>(p.k_cache) + slots[t] * kv_width + at, p.k_weight, eps, pos,
                        inv_freq, lane);
    return;
  }
#pragma unroll
  for (int i = 0; i < kE; ++i) {
    const float v = stacked != nullptr ? stacked[i] : p.v[t * kv_width + at + i];
    if (stacked != nullptr) p.v_out[t * kv_width + at + i] = v;
    static_cast<C*>(p.v_cache)[slots[t] * kv_width + at + i] = FromFloat<C>(v);
  }
}

// The kernel for head_dim 64, 128 or 256 and a cache of C; null for other sizes.
template <typename C>
auto QkNormRopeWriteKvFor(int head_dim) -> decltype(&QkNormRopeWriteKvKernel<2, C>) {
  switch (head_dim) {
    case 64:
      return QkNormRopeWriteKvKernel<2, C>;
    case 128:
      return QkNormRopeWriteKvKernel<4, C>;
    case 256:
      return QkNormRopeWriteKvKernel<8, C>;
    default:
      return nullptr;
  }
}

}  // namespace

Status QkNormRopeWriteKv(const QkvHeads& heads, const int32_t* positions, const int64_t* slots,
                         int64_t tokens, float eps, const float* inv_freq, cudaStream_t stream) {
  const int64_t rows = tokens * (heads.heads + 2 * heads.kv_heads);
  if (rows <= 0) return Status::Ok();
  constexpr int kWarpsPerBlock = 8;
  const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto kernel = heads.bf16_cache ? QkNormRopeWriteKvFor<__nv_bfloat16>(heads.head_dim)
                                       : QkNormRopeWriteKvFor<float>(heads.head_dim);
  if (kernel == nullptr) {
    return InvalidArgumentError("q/k norm + rope + kv write: head_dim " +
                                std::to_string(heads.head_dim) + " (supported: 64, 128, 256)");
  }
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(kernel, blocks, 32 * kWarpsPerBlock, 0, stream,
                                                     heads, positions, slots, tokens, eps,
                                                     inv_freq));
  return Status::Ok();
}

RopeTable RopeInvFreq(int head_dim, double theta, const RopeScaling& scaling) {
  const int half = head_dim / 2;
  RopeTable table;
  table.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    table.inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta),
                                        static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  if (scaling.type != RopeScaling::Type::kYarn) return table;
  const double factor = scaling.factor;
  if (scaling.attention_factor > 0) {
    table.attention_factor = static_cast<float>(scaling.attention_factor);
  } else if (scaling.mscale > 0 && scaling.mscale_all_dim > 0) {
    table.attention_factor = static_cast<float>(YarnMscale(factor, scaling.mscale) /
                                                YarnMscale(factor, scaling.mscale_all_dim));
  } else {
    table.attention_factor = static_cast<float>(YarnMscale(factor, 1.0));
  }
  double low = CorrectionDim(scaling.beta_fast, head_dim, theta, scaling.original_max_position);
  double high = CorrectionDim(scaling.beta_slow, head_dim, theta, scaling.original_max_position);
  if (scaling.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(head_dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const float extrapolated = table.inv_freq[i];
    const float interpolated = extrapolated / static_cast<float>(factor);
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_weight = 1.0f - ramp;
    table.inv_freq[i] =
        interpolated * (1.0f - extrapolation_weight) + extrapolated * extrapolation_weight;
  }
  return table;
}

template <typename T>
Status Rope(T* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
            const float* inv_freq, float attention_factor, cudaStream_t stream) {
  if (tokens <= 0) return Status::Ok();
  const int pairs = heads * (head_dim / 2);
  const int threads = std::min(1024, (pairs + 31) / 32 * 32);
  RopeKernel<T>
      <<<tokens, threads, 0, stream>>>(x, positions, heads, head_dim, inv_freq, attention_factor);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template Status Rope<float>(float*, const int32_t*, int64_t, int, int, const float*, float,
                            cudaStream_t);
template Status Rope<__nv_bfloat16>(__nv_bfloat16*, const int32_t*, int64_t, int, int, const float*,
                                    float, cudaStream_t);

}  // namespace spark::kernels
