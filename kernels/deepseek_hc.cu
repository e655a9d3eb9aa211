// Residual-stream kernels (deepseek_hc.h).
//  - Expand, collapse and post: a thread per four channels of a token (one channel where the
//    rows do not align), all n streams of those channels in registers.
//  - HcMix: the projection m = fn f of a token's n * hidden floats (20480 for V4.1-Flash, 24
//    outputs) plus its sum of squares, as per-chunk partial sums in scratch [chunks, tokens, 32]
//    (outputs, then the sum of squares in slot 31), by one of two kernels:
//      columns (up to 64 tokens: decode): a block per 128 columns (160 for V4.1-Flash), fn's
//        rows there staged once and held in registers, a warp per token, a float4 a lane, the
//        lanes' sums added by shuffles; the 2 MB of fn are read by 160 blocks at once;
//      tiles (more tokens: prefill): 256 tokens x 16 columns at a time through shared memory,
//        two tokens a thread, 24 dot products each against fn float4s every lane reads at the
//        same address, the columns cut into chunks so that ~256 blocks run.
//    A finish kernel adds a token's chunks in a fixed order (one warp, or eight for the 160
//    chunks of the columns kernel, combined in warp order), so results are deterministic; then
//    the sigmoid gates and Sinkhorn run on one warp a token, a comb entry a lane, in the
//    reference's order (row softmax summed in double).
//  - Engram gate: one block per (token, stream), three block sums, then the gated add.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_device.cuh"
#include "kernels/deepseek_hc.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"

namespace spark::kernels {
namespace {

using detail::Dot4;
using detail::Load4;
using detail::Sigmoid;

constexpr int kThreads = 256;
constexpr int kMixValues = 32;  // a token's sums in a chunk: outputs, then ss in slot 31
constexpr int kSumSlot = kMixValues - 1;
constexpr int kMixOutputs = kMaxHcStreams * (kMaxHcStreams + 2);  // at most 24 dot products
static_assert(kMixOutputs < kSumSlot, "the outputs and the sum of squares fit a warp's lanes");
constexpr int kMixWarps = 8;  // warps of the columns and finish kernels
// The columns kernel (few tokens): 128 columns a block, a float4 a lane.
constexpr int kMixDecodeCols = 128;
constexpr int kMixMostColumnTokens = 64;  // more tokens take the tiles kernel
// The tiles kernel (many tokens): 256 tokens x 16 columns a step.
constexpr int kMixTileWarps = 4;
constexpr int kMixTileTokens = 2 * kMixTileWarps * 32;
constexpr int kMixTileCols = 16;
constexpr int kMixTileBlocks = 256;  // blocks the chunking aims at (independent of the GPU)

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

// Few tokens (decode): the projection is the read of fn (2 MB for V4.1-Flash), so it spreads
// over many blocks. Block `chunk` takes columns [chunk * 128, + 128) of every token: its 256
// threads stage fn's rows there (outputs x 128 floats) in shared memory, each warp copies them
// into registers (a float4 of each row a lane), then takes tokens warp, warp + 8, ...: one float4
// of the token a lane, the dot products and the sum of squares a lane, and TransposeSum32 for
// the warp's sums (lane o gets value o), stored at partial[chunk, token].
__global__ void __launch_bounds__(kMixWarps * 32)
    HcMixColumnsKernel(const float* __restrict__ x, int64_t tokens, int width,
                       const float* __restrict__ fn, int outputs, float* __restrict__ partial) {
  __shared__ __align__(16) float fs[kMixOutputs * kMixDecodeCols];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int chunk = blockIdx.x;
  const int col0 = chunk * kMixDecodeCols;
  const int cols = min(kMixDecodeCols, width - col0);  // a multiple of 4
  // fn is a weight (no kernel writes it): its loads go before the wait for the kernel before.
  for (int i = threadIdx.x; i < outputs * (kMixDecodeCols / 4); i += blockDim.x) {
    const int o = i / (kMixDecodeCols / 4), c = i % (kMixDecodeCols / 4) * 4;
    const float4 v = c < cols ? Load4(fn + int64_t{o} * width + col0 + c, true)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    *reinterpret_cast<float4*>(fs + o * kMixDecodeCols + c) = v;
  }
  detail::WaitForPrecedingKernel();
  __syncthreads();
  float4 f[kMixOutputs];
#pragma unroll
  for (int o = 0; o < kMixOutputs; ++o) {
    f[o] = o < outputs ? *reinterpret_cast<const float4*>(fs + o * kMixDecodeCols + 4 * lane)
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  const bool in_row = 4 * lane < cols;
  for (int64_t t = warp; t < tokens; t += kMixWarps) {
    const float4 xv =
        in_row ? Load4(x + t * width + col0 + 4 * lane, true) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float acc[kMixValues];
#pragma unroll
    for (int o = 0; o < kMixValues; ++o) acc[o] = o < kMixOutputs ? Dot4(f[o], xv) : 0.0f;
    acc[kSumSlot] = Dot4(xv, xv);
    const float v = TransposeSum32(acc, lane);
    partial[(int64_t{chunk} * tokens + t) * kMixValues + lane] = v;
  }
}

// Many tokens (prefill): a tiled product, lanes = tokens. A block of kMixTileWarps warps takes
// kMixTileTokens tokens (two a thread, 128 apart) and the columns [chunk * chunk_cols, +
// chunk_cols); 16 columns at a time of the tokens and of fn's rows go to shared memory by
// cp.async (double-buffered), then each thread adds, per four columns, the dot products of its
// two tokens with every fn row (the fn float4 the same address for the whole warp: a broadcast)
// and their sums of squares. The sums go to partial[chunk, token].
__global__ void __launch_bounds__(kMixTileWarps * 32)
    HcMixTilesKernel(const float* __restrict__ x, int64_t tokens, int width,
                     const float* __restrict__ fn, int outputs, int chunk_cols,
                     float* __restrict__ partial) {
  constexpr int kThreadsT = kMixTileWarps * 32;
  constexpr int kPitch = kMixTileCols + 4;  // floats a staged token row: rows 4 banks apart
  __shared__ __align__(16) float xs[2][kMixTileTokens * kPitch];
  __shared__ __align__(16) float fs[2][kMixOutputs * kMixTileCols];
  detail::WaitForPrecedingKernel();
  const int chunk = blockIdx.x;
  const int64_t t0 = int64_t{blockIdx.y} * kMixTileTokens;
  const int col0 = chunk * chunk_cols;
  const int col1 = min(width, col0 + chunk_cols);
  const int steps = (col1 - col0) / kMixTileCols;
  auto stage = [&](int buf, int c0) {
    for (int i = threadIdx.x; i < kMixTileTokens * (kMixTileCols / 4); i += kThreadsT) {
      const int r = i / (kMixTileCols / 4), c = i % (kMixTileCols / 4) * 4;
      const bool valid = t0 + r < tokens;
      detail::CpAsync16(xs[buf] + r * kPitch + c, valid ? x + (t0 + r) * width + c0 + c : x, valid);
    }
    for (int i = threadIdx.x; i < outputs * (kMixTileCols / 4); i += kThreadsT) {
      const int o = i / (kMixTileCols / 4), c = i % (kMixTileCols / 4) * 4;
      detail::CpAsync16(fs[buf] + o * kMixTileCols + c, fn + int64_t{o} * width + c0 + c, true);
    }
    detail::CpAsyncCommit();
  };
  const int r0 = threadIdx.x, r1 = threadIdx.x + kThreadsT;  // this thread's tokens in the tile
  float acc0[kMixValues], acc1[kMixValues];
#pragma unroll
  for (int o = 0; o < kMixValues; ++o) acc0[o] = acc1[o] = 0.0f;
  stage(0, col0);
  for (int step = 0; step < steps; ++step) {
    const int buf = step % 2;
    if (step + 1 < steps) {
      stage(buf ^ 1, col0 + (step + 1) * kMixTileCols);
      detail::CpAsyncWaitGroup<1>();
    } else {
      detail::CpAsyncWaitGroup<0>();
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kMixTileCols; c += 4) {
      const float4 x0 = *reinterpret_cast<const float4*>(xs[buf] + r0 * kPitch + c);
      const float4 x1 = *reinterpret_cast<const float4*>(xs[buf] + r1 * kPitch + c);
      acc0[kSumSlot] += Dot4(x0, x0);
      acc1[kSumSlot] += Dot4(x1, x1);
#pragma unroll
      for (int o = 0; o < kMixOutputs; ++o) {
        if (o < outputs) {
          const float4 f = *reinterpret_cast<const float4*>(fs[buf] + o * kMixTileCols + c);
          acc0[o] += Dot4(f, x0);
          acc1[o] += Dot4(f, x1);
        }
      }
    }
    __syncthreads();  // the buffer is staged again two steps on
  }
  float* out0 = partial + (int64_t{chunk} * tokens + t0 + r0) * kMixValues;
  float* out1 = partial + (int64_t{chunk} * tokens + t0 + r1) * kMixValues;
#pragma unroll
  for (int o = 0; o <= kMixOutputs; ++o) {  // the outputs, then the sum of squares
    const int slot = o < kMixOutputs ? o : kSumSlot;
    if (o < kMixOutputs && o >= outputs) continue;
    if (t0 + r0 < tokens) out0[slot] = acc0[slot];
    if (t0 + r1 < tokens) out1[slot] = acc1[slot];
  }
}

// The finish of one token on one warp, lane = value: the mixing weights from the projection's
// sums raw[32] (outputs, then the sum of squares in slot 31), as the reference computes them.
// Sinkhorn runs on n * n lanes, lane i * n + j holding comb[i][j]; a row's or a column's sum is
// read through shuffles in the reference's order (row softmax summed in double), so each lane
// divides exactly as the reference does. Every lane of the warp calls it.
__device__ void HcMixFinishWarp(const float* raw, const HcMixParams& p, int64_t t, int lane) {
  const int n = p.n;
  const float inv = 1.0f / sqrtf(raw[kSumSlot] / static_cast<float>(n * p.hidden) + p.norm_eps);
  if (lane < n) p.pre[t * n + lane] = Sigmoid(raw[lane] * inv * p.scale[0] + p.base[lane]) + p.hc_eps;
  if (p.post == nullptr) return;  // the same for the whole warp
  if (lane >= n && lane < 2 * n) {
    p.post[t * n + lane - n] = 2.0f * Sigmoid(raw[lane] * inv * p.scale[1] + p.base[lane]);
  }
  const bool mine = lane < n * n;
  const int row = mine ? lane / n : 0, col = mine ? lane % n : 0;
  float c = mine ? raw[2 * n + lane] * inv * p.scale[2] + p.base[2 * n + lane] : 0.0f;
  auto at = [&](float v, int i, int j) { return __shfl_sync(0xffffffffu, v, i * n + j); };
  // Row softmax (a row without a finite maximum becomes zeros), then + eps.
  float max = -INFINITY;
  for (int j = 0; j < n; ++j) max = fmaxf(max, at(c, row, j));
  const float e = isfinite(max) ? expf(c - max) : 0.0f;
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += at(e, row, j);
  c = (isfinite(max) ? static_cast<float>(e / sum) : 0.0f) + p.hc_eps;
  for (int it = 0; it < p.sinkhorn_iters; ++it) {
    if (it > 0) {  // rows
      float s = 0.0f;
      for (int j = 0; j < n; ++j) s += at(c, row, j);
      c /= s + p.hc_eps;
    }
    float s = 0.0f;  // columns
    for (int i = 0; i < n; ++i) s += at(c, i, col);
    c /= s + p.hc_eps;
  }
  if (mine) p.comb[t * n * n + lane] = c;
}

// Adds the chunks' sums of each token in a fixed order (deterministic), then finishes it. A
// token takes kWarpsPerToken warps of the block: warp w of a token adds chunks w, w + k, ...
// (lane = value), and the token's first warp adds those sums in warp order.
template <int kWarpsPerToken>
__global__ void __launch_bounds__(kMixWarps * 32)
    HcMixFinishKernel(const float* __restrict__ partial, int chunks, HcMixParams p) {
  constexpr int kTokensPerBlock = kMixWarps / kWarpsPerToken;
  __shared__ float sums[kMixWarps][kMixValues];
  detail::WaitForPrecedingKernel();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = warp % kWarpsPerToken, slot = warp / kWarpsPerToken;
  const int64_t t = int64_t{blockIdx.x} * kTokensPerBlock + slot;
  float v = 0.0f;
  if (t < p.tokens) {
    for (int c = part; c < chunks; c += kWarpsPerToken) {
      v += partial[(int64_t{c} * p.tokens + t) * kMixValues + lane];
    }
  }
  sums[warp][lane] = v;
  __syncthreads();
  if (part != 0 || t >= p.tokens) return;  // whole warps
  float total = sums[warp][lane];
  for (int w = 1; w < kWarpsPerToken; ++w) total += sums[warp + w][lane];
  __syncwarp();
  sums[warp][lane] = total;
  __syncwarp();
  HcMixFinishWarp(sums[warp], p, t, lane);
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

namespace {

// How HcMix splits its projection: the columns kernel for few tokens (or widths the tiles do
// not divide), else the tiles kernel with the columns cut into `chunks` of `chunk_cols` so that
// about kMixTileBlocks blocks run. Fixed by the shape alone, so the summation order is too.
struct MixPlan {
  bool tiles = false;
  int chunks = 0, chunk_cols = 0;
  int64_t token_blocks = 1;
};

MixPlan PlanMix(int64_t tokens, int64_t width) {
  MixPlan m;
  m.tiles = tokens > kMixMostColumnTokens && width % kMixTileCols == 0;
  if (!m.tiles) {
    m.chunk_cols = kMixDecodeCols;
    m.chunks = static_cast<int>((width + kMixDecodeCols - 1) / kMixDecodeCols);
    return m;
  }
  m.token_blocks = (tokens + kMixTileTokens - 1) / kMixTileTokens;
  const int64_t steps = width / kMixTileCols;
  const int64_t want = std::clamp<int64_t>((kMixTileBlocks + m.token_blocks - 1) / m.token_blocks,
                                           1, steps);
  m.chunk_cols = static_cast<int>((steps + want - 1) / want) * kMixTileCols;
  m.chunks = static_cast<int>((width + m.chunk_cols - 1) / m.chunk_cols);
  return m;
}

}  // namespace

int64_t HcMixScratchFloats(int64_t tokens, int n, int hidden) {
  if (tokens <= 0) return 0;
  return PlanMix(tokens, int64_t{n} * hidden).chunks * tokens * kMixValues;
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
  const MixPlan m = PlanMix(p.tokens, width);
  if (m.token_blocks > 65535 || p.tokens > INT32_MAX / kMixValues) {
    return InvalidArgumentError("hc mix: " + std::to_string(p.tokens) + " tokens in one call");
  }
  if (m.tiles) {
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
        HcMixTilesKernel, dim3(m.chunks, static_cast<unsigned>(m.token_blocks)),
        kMixTileWarps * 32, 0, stream, p.streams, p.tokens, static_cast<int>(width), p.fn, outputs,
        m.chunk_cols, scratch));
  } else {
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
        HcMixColumnsKernel, m.chunks, kMixWarps * 32, 0, stream, p.streams, p.tokens,
        static_cast<int>(width), p.fn, outputs, scratch));
  }
  const float* partial = scratch;
  if (m.chunks >= 4 * kMixWarps) {  // many chunks: eight warps a token
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(HcMixFinishKernel<kMixWarps>,
                                                       static_cast<unsigned>(p.tokens),
                                                       kMixWarps * 32, 0, stream, partial,
                                                       m.chunks, p));
  } else {
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
        HcMixFinishKernel<1>, detail::CeilDiv(p.tokens, kMixWarps), kMixWarps * 32, 0, stream,
        partial, m.chunks, p));
  }
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
