// Decode GEMV: one warp per output feature; each lane loads 8 bf16 weights (16 bytes) per step
// and multiplies them into every row's accumulator. Eight warps per block.
#include "kernels/cuda_check.h"
#include "kernels/dependent_launch.cuh"
#include "kernels/device_math.cuh"
#include "kernels/gemv.h"

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
  const uint4* row = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(feature) * k);
  const int chunks = k / 8;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    float wf[8];
    Widen(__ldg(row + c), wf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * k) + 2 * c;
      const float4 a = xr[0], b = xr[1];
      acc[r] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y +
                wf[6] * b.z + wf[7] * b.w;
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) out[static_cast<int64_t>(r) * n + feature] = v;
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
