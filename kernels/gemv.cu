// Decode GEMV: one warp per output feature; each lane loads 8 bf16 weights (16 bytes) per step
// and multiplies them into every row's accumulator. Eight warps per block.
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/gemv.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ void Widen(uint4 packed, float* w) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

// acc[i][r] = x[r] . w_rows[i] for R rows of x and W weight rows of k bf16 each, summed over
// the warp (every lane gets the sums). The W rows' loads share one loop.
template <int R, int W>
__device__ __forceinline__ void Dots(const float* __restrict__ x, int k,
                                     const __nv_bfloat16* const (&w_rows)[W], int lane,
                                     float (&acc)[W][R]) {
  const int chunks = k / 8;
#pragma unroll
  for (int i = 0; i < W; ++i)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[i][r] = 0.0f;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    float wf[W][8];
#pragma unroll
    for (int i = 0; i < W; ++i) Widen(__ldg(reinterpret_cast<const uint4*>(w_rows[i]) + c), wf[i]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * k) + 2 * c;
      const float4 a = xr[0], b = xr[1];
#pragma unroll
      for (int i = 0; i < W; ++i) {
        acc[i][r] += wf[i][0] * a.x + wf[i][1] * a.y + wf[i][2] * a.z + wf[i][3] * a.w +
                     wf[i][4] * b.x + wf[i][5] * b.y + wf[i][6] * b.z + wf[i][7] * b.w;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < W; ++i)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int off = 16; off > 0; off /= 2)
        acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], off);
}

// The segments with their first global feature: begin[i] = n[0] + ... + n[i - 1].
struct Segments {
  GemvSegments s;
  int begin[kGemvMaxSegments + 1];
};

template <int R>
__global__ void __launch_bounds__(kWarps * 32)
    GemvKernel(const float* __restrict__ x, int k, int total, Segments segs) {
  detail::WaitForPrecedingKernel();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int global = blockIdx.x * kWarps + warp;
  if (global >= total) return;
  // Constant indices only (unrolled): a runtime index into the parameters copies them to every
  // thread's stack (112 bytes), which took the 4096 x 24576 GEMV from 87% to 55% of bandwidth.
  const __nv_bfloat16* w = segs.s.w[0];
  float* out = segs.s.out[0];
  int n = segs.s.n[0], begin = 0;
#pragma unroll
  for (int i = 1; i < kGemvMaxSegments; ++i) {
    if (i < segs.s.count && global >= segs.begin[i]) {
      w = segs.s.w[i];
      out = segs.s.out[i];
      n = segs.s.n[i];
      begin = segs.begin[i];
    }
  }
  const int feature = global - begin;
  const __nv_bfloat16* rows[1] = {w + static_cast<int64_t>(feature) * k};
  float acc[1][R];
  Dots<R, 1>(x, k, rows, lane, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane == 0) out[static_cast<int64_t>(r) * n + feature] = acc[0][r];
  }
}

// act[r, f] = SiLU(x[r] . w[f]) * (x[r] . w[inter + f]): a warp takes gate row f and up row
// inter + f of the stacked [gate; up] weight together.
template <int R>
__global__ void __launch_bounds__(kWarps * 32)
    GemvSiluMulKernel(const float* __restrict__ x, int k, int inter,
                      const __nv_bfloat16* __restrict__ w, float* __restrict__ act) {
  detail::WaitForPrecedingKernel();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int f = blockIdx.x * kWarps + warp;
  if (f >= inter) return;
  const __nv_bfloat16* rows[2] = {w + static_cast<int64_t>(f) * k,
                                  w + static_cast<int64_t>(inter + f) * k};
  float acc[2][R];
  Dots<R, 2>(x, k, rows, lane, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float g = acc[0][r], u = acc[1][r];
    if (lane == 0) act[static_cast<int64_t>(r) * inter + f] = g / (1.0f + expf(-g)) * u;
  }
}

}  // namespace

Status GemvBf16Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
                    cudaStream_t stream) {
  if (rows < 1 || rows > kGemvMaxRows || k % 8 != 0 || segments.count < 1 ||
      segments.count > kGemvMaxSegments) {
    return InvalidArgumentError(
        "gemv: needs 1.." + std::to_string(kGemvMaxRows) + " rows, k a multiple of 8 and 1.." +
        std::to_string(kGemvMaxSegments) + " weights (got " + std::to_string(rows) + " rows, k " +
        std::to_string(k) + ", " + std::to_string(segments.count) + " weights)");
  }
  Segments segs{segments, {0}};
  for (int i = 0; i < segments.count; ++i) segs.begin[i + 1] = segs.begin[i] + segments.n[i];
  const int total = segs.begin[segments.count];
  if (total <= 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(detail::CeilDiv(total, kWarps));
  void (*const by_rows[])(const float*, int, int, Segments) = {GemvKernel<1>, GemvKernel<2>,
                                                               GemvKernel<3>, GemvKernel<4>};
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(by_rows[rows - 1], blocks, kWarps * 32, 0,
                                                     stream, x, k, total, segs));
  return Status::Ok();
}

Status GemvBf16SiluMul(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int inter,
                       float* act, cudaStream_t stream) {
  if (rows < 1 || rows > kGemvMaxRows || k % 8 != 0) {
    return InvalidArgumentError("gemv + silu-mul: needs 1.." + std::to_string(kGemvMaxRows) +
                                " rows and k a multiple of 8 (got " + std::to_string(rows) +
                                " rows, k " + std::to_string(k) + ")");
  }
  if (inter <= 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(detail::CeilDiv(inter, kWarps));
  void (*const by_rows[])(const float*, int, int, const __nv_bfloat16*, float*) = {
      GemvSiluMulKernel<1>, GemvSiluMulKernel<2>, GemvSiluMulKernel<3>, GemvSiluMulKernel<4>};
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(by_rows[rows - 1], blocks, kWarps * 32, 0,
                                                     stream, x, k, inter, w, act));
  return Status::Ok();
}

Status GemvBf16(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int n, float* out,
                cudaStream_t stream) {
  GemvSegments one;
  one.count = 1;
  one.w[0] = w;
  one.out[0] = out;
  one.n[0] = n;
  return GemvBf16Many(x, rows, k, one, stream);
}

}  // namespace spark::kernels
