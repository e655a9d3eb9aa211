// Residual-stream kernels (deepseek_hc.h).
//  - Expand, collapse and post: a thread per four channels of a token (one channel where the
//    rows do not align), all n streams of those channels in registers.
//  - HcMix: the projection m = fn f of a token's n * hidden floats (20480 for V4.1-Flash, 24
//    outputs) is a tall-skinny product bound by reading the streams once. A warp takes two tokens
//    and 512 columns (four float4 a lane), accumulates the 24 dot products and the sum of
//    squares per lane, and reduces the 32 values of each token across the lanes in 31 shuffles
//    (each step halves the values a lane keeps); a block's 8 warps take 16 tokens of the same
//    columns, so fn comes from L1. The per-chunk sums go to scratch [chunks, tokens, 32]; a
//    second kernel adds them in chunk order (deterministic) and runs the sigmoid gates and the
//    Sinkhorn iterations, one lane per token, in the reference's order (row softmax summed in
//    double).
//  - Engram gate: one block per (token, stream), three block sums, then the gated add.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_device.cuh"
#include "kernels/deepseek_hc.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

using detail::Dot4;
using detail::Load4;
using detail::Sigmoid;

constexpr int kThreads = 256;
constexpr int kMixCols = 512;   // columns of one partial sum (four float4 a lane)
constexpr int kMixTokens = 2;   // tokens a warp
constexpr int kMixWarps = 8;    // warps a block (of the same columns)
constexpr int kMixValues = 32;  // a warp's values per token: outputs, then ss in slot 31
constexpr int kSumSlot = kMixValues - 1;

unsigned GridFor(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::CeilDiv(items, kThreads), 1, 65536));
}

// kVec channels of row `p` (kVec 4: one 16-byte access; plain loads: the kernels below may write
// the rows they read).
template <int kVec>
__device__ __forceinline__ void LoadV(const float* p, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    v[0] = f.x;
    v[1] = f.y;
    v[2] = f.z;
    v[3] = f.w;
  } else {
    v[0] = *p;
  }
}

template <int kVec>
__device__ __forceinline__ void StoreV(const float (&v)[kVec], float* p) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}

template <int kVec>
__global__ void HcExpandKernel(const float* __restrict__ x, int64_t tokens, int n, int hidden,
                               float* __restrict__ streams) {
  detail::WaitForPrecedingKernel();
  const int per_row = hidden / kVec;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < tokens * per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int c = static_cast<int>(i % per_row) * kVec;
    float v[kVec];
    LoadV<kVec>(x + t * hidden + c, v);
    for (int j = 0; j < n; ++j) StoreV<kVec>(v, streams + (t * n + j) * hidden + c);
  }
}

template <int kVec>
__global__ void HcCollapseKernel(const float* __restrict__ streams, const float* __restrict__ pre,
                                 int64_t tokens, int n, int hidden, float* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int per_row = hidden / kVec;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < tokens * per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int c = static_cast<int>(i % per_row) * kVec;
    float sum[kVec] = {};
    for (int j = 0; j < n; ++j) {
      float x[kVec];
      LoadV<kVec>(streams + (t * n + j) * hidden + c, x);
      const float p = pre[t * n + j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum[e] += p * x[e];
    }
    StoreV<kVec>(sum, out + t * hidden + c);
  }
}

template <int kVec>
__global__ void HcPostKernel(float* streams, const float* __restrict__ block_out,
                             const float* __restrict__ post, const float* __restrict__ comb,
                             int64_t tokens, int n, int hidden) {
  detail::WaitForPrecedingKernel();
  const int per_row = hidden / kVec;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < tokens * per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int c = static_cast<int>(i % per_row) * kVec;
    float x[kMaxHcStreams][kVec] = {}, y[kVec];
#pragma unroll
    for (int j = 0; j < kMaxHcStreams; ++j) {
      if (j < n) LoadV<kVec>(streams + (t * n + j) * hidden + c, x[j]);
    }
    LoadV<kVec>(block_out + t * hidden + c, y);
    const float* ct = comb + t * n * n;
#pragma unroll
    for (int k = 0; k < kMaxHcStreams; ++k) {
      if (k >= n) break;
      float next[kVec];
      const float pk = post[t * n + k];
#pragma unroll
      for (int e = 0; e < kVec; ++e) next[e] = pk * y[e];
#pragma unroll
      for (int j = 0; j < kMaxHcStreams; ++j) {
        if (j >= n) break;
        const float cj = ct[j * n + k];
#pragma unroll
        for (int e = 0; e < kVec; ++e) next[e] += cj * x[j][e];
      }
      StoreV<kVec>(next, streams + (t * n + k) * hidden + c);
    }
  }
}

// One step of TransposeSum32: lanes exchange the half of their kHalf * 2 values the partner
// `kHalf` lanes away keeps, and add what they receive to the half they keep.
template <int kHalf>
__device__ __forceinline__ void TransposeStep(float (&v)[kMixValues], int lane) {
  const bool upper = (lane & kHalf) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? v[i] : v[i + kHalf];
    const float keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kHalf);
  }
}

// Sums v[i] over the warp's lanes for each i < 32 and returns, in lane l, the sum of v[l]: each
// step halves the values a lane holds (31 shuffles in all).
__device__ __forceinline__ float TransposeSum32(float (&v)[kMixValues], int lane) {
  TransposeStep<16>(v, lane);
  TransposeStep<8>(v, lane);
  TransposeStep<4>(v, lane);
  TransposeStep<2>(v, lane);
  TransposeStep<1>(v, lane);
  return v[0];
}

__global__ void __launch_bounds__(kMixWarps * 32)
    HcMixPartialKernel(const float* __restrict__ x, int64_t tokens, int width,
                       const float* __restrict__ fn, int outputs, float* __restrict__ partial) {
  detail::WaitForPrecedingKernel();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int chunk = blockIdx.x;
  const int64_t t0 = (int64_t{blockIdx.y} * kMixWarps + warp) * kMixTokens;
  if (t0 >= tokens) return;  // the whole warp: no block-wide synchronisation below
  float acc[kMixTokens][kMixValues];
#pragma unroll
  for (int k = 0; k < kMixTokens; ++k)
#pragma unroll
    for (int o = 0; o < kMixValues; ++o) acc[k][o] = 0.0f;
#pragma unroll
  for (int r = 0; r < kMixCols / 128; ++r) {
    const int col = chunk * kMixCols + r * 128 + 4 * lane;
    if (col < width) {  // width % 4 == 0: the whole float4 is in the row
      float4 xv[kMixTokens];
#pragma unroll
      for (int k = 0; k < kMixTokens; ++k) {
        xv[k] = t0 + k < tokens ? Load4(x + (t0 + k) * width + col, true)
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        acc[k][kSumSlot] += Dot4(xv[k], xv[k]);
      }
#pragma unroll
      for (int o = 0; o < kSumSlot; ++o) {
        if (o < outputs) {
          const float4 f = Load4(fn + int64_t{o} * width + col, true);
#pragma unroll
          for (int k = 0; k < kMixTokens; ++k) acc[k][o] += Dot4(f, xv[k]);
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kMixTokens; ++k) {
    const float v = TransposeSum32(acc[k], lane);
    if (t0 + k < tokens) partial[(int64_t{chunk} * tokens + t0 + k) * kMixValues + lane] = v;
  }
}

// The reference's softmax of n values in place (double sum; a row without a finite maximum
// becomes zeros).
__device__ void SoftmaxRow(float* v, int n) {
  float max = -INFINITY;
  for (int i = 0; i < n; ++i) max = fmaxf(max, v[i]);
  if (!isfinite(max)) {
    for (int i = 0; i < n; ++i) v[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    v[i] = expf(v[i] - max);
    sum += v[i];
  }
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] / sum);
}

// Row softmax + eps, a column normalisation, then iters - 1 rounds of rows and columns.
__device__ void Sinkhorn(float* c, int n, int iters, float eps) {
  for (int i = 0; i < n; ++i) {
    SoftmaxRow(c + i * n, n);
    for (int j = 0; j < n; ++j) c[i * n + j] += eps;
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {  // rows
      for (int i = 0; i < n; ++i) {
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += c[i * n + j];
        for (int j = 0; j < n; ++j) c[i * n + j] /= sum + eps;
      }
    }
    for (int j = 0; j < n; ++j) {  // columns
      float sum = 0.0f;
      for (int i = 0; i < n; ++i) sum += c[i * n + j];
      for (int i = 0; i < n; ++i) c[i * n + j] /= sum + eps;
    }
  }
}

// A warp per token: the chunks' sums (lane = value), then lane 0 finishes the token.
__global__ void HcMixFinishKernel(const float* __restrict__ partial, int chunks, HcMixParams p) {
  detail::WaitForPrecedingKernel();
  __shared__ float vals[kMixWarps][kMixValues];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = int64_t{blockIdx.x} * kMixWarps + warp;
  if (t >= p.tokens) return;
  float v = 0.0f;
  for (int c = 0; c < chunks; ++c) v += partial[(int64_t{c} * p.tokens + t) * kMixValues + lane];
  vals[warp][lane] = v;
  __syncwarp();
  if (lane != 0) return;
  const int n = p.n;
  const float* raw = vals[warp];
  const float inv = 1.0f / sqrtf(raw[kSumSlot] / static_cast<float>(n * p.hidden) + p.norm_eps);
  for (int j = 0; j < n; ++j) {
    p.pre[t * n + j] = Sigmoid(raw[j] * inv * p.scale[0] + p.base[j]) + p.hc_eps;
  }
  if (p.post == nullptr) return;
  for (int j = 0; j < n; ++j) {
    p.post[t * n + j] = 2.0f * Sigmoid(raw[n + j] * inv * p.scale[1] + p.base[n + j]);
  }
  float c[kMaxHcStreams * kMaxHcStreams];
  for (int i = 0; i < n * n; ++i) c[i] = raw[2 * n + i] * inv * p.scale[2] + p.base[2 * n + i];
  Sinkhorn(c, n, p.sinkhorn_iters, p.hc_eps);
  for (int i = 0; i < n * n; ++i) p.comb[t * n * n + i] = c[i];
}

__global__ void EngramGateKernel(EngramGateParams p) {
  detail::WaitForPrecedingKernel();
  __shared__ float red[32];
  const int64_t row = blockIdx.x;  // (token, stream)
  const int64_t t = row / p.n;
  const int j = static_cast<int>(row % p.n);
  float* h = p.streams + row * p.hidden;
  const float* key = p.kv + (t * (p.n + 1) + j) * p.hidden;
  const float* value = p.kv + (t * (p.n + 1) + p.n) * p.hidden;
  const float* w = p.weight + int64_t{j} * p.hidden;
  float hh = 0.0f, kk = 0.0f, dot = 0.0f;
  for (int c = threadIdx.x; c < p.hidden; c += blockDim.x) {
    const float hc = h[c], kc = key[c];
    hh += hc * hc;
    kk += kc * kc;
    dot += hc * w[c] * kc;
  }
  hh = detail::BlockSum(hh, red);
  kk = detail::BlockSum(kk, red);
  dot = detail::BlockSum(dot, red);
  const float hidden = static_cast<float>(p.hidden);
  const float rstd = (1.0f / sqrtf(hh / hidden + p.eps)) * (1.0f / sqrtf(kk / hidden + p.eps));
  const float d = dot * rstd * (1.0f / sqrtf(hidden));
  const float gate = Sigmoid(copysignf(sqrtf(fmaxf(fabsf(d), 1e-6f)), d));
  for (int c = threadIdx.x; c < p.hidden; c += blockDim.x) h[c] += gate * value[c];
}

// Whether rows of `hidden` floats at each pointer take four-float accesses.
bool Vec4(int hidden, std::initializer_list<const void*> pointers) {
  if (hidden % 4 != 0) return false;
  for (const void* q : pointers) {
    if (q != nullptr && !detail::Aligned16(q)) return false;
  }
  return true;
}

Status CheckStreams(const char* op, int n, int hidden, int max_n) {
  if (n <= 0 || hidden <= 0 || n > max_n) {
    return InvalidArgumentError(std::string(op) + ": " + std::to_string(n) + " streams of " +
                                std::to_string(hidden) + " (takes 1 to " + std::to_string(max_n) +
                                " streams)");
  }
  return Status::Ok();
}

}  // namespace

Status HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams,
                cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckStreams("hc expand", n, hidden, 1 << 16));
  if (tokens <= 0) return Status::Ok();
  const bool vec = Vec4(hidden, {x, streams});
  const unsigned grid = GridFor(tokens * (vec ? hidden / 4 : hidden));
  SPARK_CUDA_RETURN_IF_ERROR(vec ? detail::LaunchDependent(HcExpandKernel<4>, grid, kThreads, 0,
                                                           stream, x, tokens, n, hidden, streams)
                                 : detail::LaunchDependent(HcExpandKernel<1>, grid, kThreads, 0,
                                                           stream, x, tokens, n, hidden, streams));
  return Status::Ok();
}

int64_t HcMixScratchFloats(int64_t tokens, int n, int hidden) {
  const int64_t chunks = (int64_t{n} * hidden + kMixCols - 1) / kMixCols;
  return chunks * tokens * kMixValues;
}

Status HcMix(const HcMixParams& p, float* scratch, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckStreams("hc mix", p.n, p.hidden, kMaxHcStreams));
  const int64_t width = int64_t{p.n} * p.hidden;
  if (width % 4 != 0 || width > INT32_MAX || !detail::Aligned16(p.streams) ||
      !detail::Aligned16(p.fn)) {
    return InvalidArgumentError("hc mix: n * hidden (" + std::to_string(width) +
                                ") must be a multiple of 4 with 16-byte aligned streams and fn");
  }
  if ((p.post == nullptr) != (p.comb == nullptr) || p.sinkhorn_iters < 1) {
    return InvalidArgumentError("hc mix: post and comb go together; sinkhorn_iters >= 1");
  }
  if (p.tokens <= 0) return Status::Ok();
  const int outputs = p.post != nullptr ? p.n * (p.n + 2) : p.n;
  const int chunks = static_cast<int>((width + kMixCols - 1) / kMixCols);
  const int64_t token_blocks = (p.tokens + kMixWarps * kMixTokens - 1) / (kMixWarps * kMixTokens);
  if (token_blocks > 65535) {
    return InvalidArgumentError("hc mix: " + std::to_string(p.tokens) +
                                " tokens in one call (at most " +
                                std::to_string(65535 * kMixWarps * kMixTokens) + ")");
  }
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      HcMixPartialKernel, dim3(chunks, static_cast<unsigned>(token_blocks)), kMixWarps * 32, 0,
      stream, p.streams, p.tokens, static_cast<int>(width), p.fn, outputs, scratch));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      HcMixFinishKernel, detail::CeilDiv(p.tokens, kMixWarps), kMixWarps * 32, 0, stream,
      static_cast<const float*>(scratch), chunks, p));
  return Status::Ok();
}

Status HcCollapse(const float* streams, const float* pre, int64_t tokens, int n, int hidden,
                  float* out, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckStreams("hc collapse", n, hidden, 1 << 16));
  if (tokens <= 0) return Status::Ok();
  const bool vec = Vec4(hidden, {streams, out});
  const unsigned grid = GridFor(tokens * (vec ? hidden / 4 : hidden));
  SPARK_CUDA_RETURN_IF_ERROR(
      vec ? detail::LaunchDependent(HcCollapseKernel<4>, grid, kThreads, 0, stream, streams, pre,
                                    tokens, n, hidden, out)
          : detail::LaunchDependent(HcCollapseKernel<1>, grid, kThreads, 0, stream, streams, pre,
                                    tokens, n, hidden, out));
  return Status::Ok();
}

Status HcPost(float* streams, const float* block_out, const float* post, const float* comb,
              int64_t tokens, int n, int hidden, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckStreams("hc post", n, hidden, kMaxHcStreams));
  if (tokens <= 0) return Status::Ok();
  const bool vec = Vec4(hidden, {streams, block_out});
  const unsigned grid = GridFor(tokens * (vec ? hidden / 4 : hidden));
  SPARK_CUDA_RETURN_IF_ERROR(
      vec ? detail::LaunchDependent(HcPostKernel<4>, grid, kThreads, 0, stream, streams, block_out,
                                    post, comb, tokens, n, hidden)
          : detail::LaunchDependent(HcPostKernel<1>, grid, kThreads, 0, stream, streams, block_out,
                                    post, comb, tokens, n, hidden));
  return Status::Ok();
}

Status EngramGate(const EngramGateParams& p, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckStreams("engram gate", p.n, p.hidden, 1 << 16));
  if (p.tokens <= 0) return Status::Ok();
  const int64_t rows = p.tokens * p.n;
  if (rows > INT32_MAX) return InvalidArgumentError("engram gate: too many rows");
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(EngramGateKernel, static_cast<unsigned>(rows),
                                                     kThreads, 0, stream, p));
  return Status::Ok();
}

}  // namespace spark::kernels
