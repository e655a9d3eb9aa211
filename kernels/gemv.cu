// Decode GEMV: a group of warps computes one output feature (bf16) or four (fp8); each lane
// loads 16 bytes of weights per row and step (8 bf16 or 16 fp8) and multiplies them into every
// row's accumulator. Four warps per block; a group is 1 to 4 of them, each over a slice of k, so
// short, wide matrices (few features) still keep enough loads in flight.
// fp8: each lane's 16 weights lie in one 128-column block, so their dot product is taken first
// and multiplied by the block's scale once.
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/fp8.h"
#include "kernels/gemv.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

// Warps per block: 4 was the fastest of 2, 4, 8 and 16 for batch-1 decode in bf16 and fp8
// (bench/engine/CUDA_BACKEND_NOTES.md, "GEMV blocks of 4 warps").
constexpr int kWarps = 4;

// Weights per 16-byte chunk of a row.
template <bool kFp8>
constexpr int kPerChunk = kFp8 ? 16 : 8;

__device__ __forceinline__ void Widen(uint4 packed, float* w) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void WidenFp8(uint4 packed, float* w) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&packed);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 f = detail::Fp8x2ToFloat2(pairs[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

// A 16-byte chunk of a weight row, not kept in L1: each chunk is read once per step, and L1
// stays for x, which every warp of the SM re-reads for each of its chunks (faster than __ldg;
// L2 policies or prefetches on top were slower: bench/engine/CUDA_BACKEND_NOTES.md, "GEMV weight loads that skip
// L1").
__device__ __forceinline__ uint4 LoadWeightChunk(const uint4* p) {
  uint4 v;
  asm("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// acc[i][r] += x[r] . the W weight chunks `packed` (chunk c of each of the W rows) for R rows of
// x of k elements each (fp8: with the scale rows s_rows).
template <int R, int W, bool kFp8>
__device__ __forceinline__ void Accumulate(const float* __restrict__ x, int k,
                                           const uint4 (&packed)[W],
                                           const float* const (&s_rows)[W], int c,
                                           float (&acc)[W][R]) {
  constexpr int kPer = kPerChunk<kFp8>;
  float wf[W][kPer];
#pragma unroll
  for (int i = 0; i < W; ++i) {
    if constexpr (kFp8) {
      WidenFp8(packed[i], wf[i]);
    } else {
      Widen(packed[i], wf[i]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4* xr =
        reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * k) + (kPer / 4) * c;
    if constexpr (kFp8) {
      float4 a[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) a[q] = xr[q];
#pragma unroll
      for (int i = 0; i < W; ++i) {
        float d = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          d += wf[i][4 * q] * a[q].x + wf[i][4 * q + 1] * a[q].y + wf[i][4 * q + 2] * a[q].z +
               wf[i][4 * q + 3] * a[q].w;
        }
        acc[i][r] += d * s_rows[i][c * 16 / kFp8Block];
      }
    } else {
      const float4 a = xr[0], b = xr[1];
#pragma unroll
      for (int i = 0; i < W; ++i) {
        acc[i][r] += wf[i][0] * a.x + wf[i][1] * a.y + wf[i][2] * a.z + wf[i][3] * a.w +
                     wf[i][4] * b.x + wf[i][5] * b.y + wf[i][6] * b.z + wf[i][7] * b.w;
      }
    }
  }
}

// Weight chunks a lane loads before it waits for the preceding kernel (the weights do not depend
// on it, so these loads overlap the kernel before instead of following it): two. More cost
// registers, and blocks per SM with them (bench/engine/CUDA_BACKEND_NOTES.md, "GEMV early loads and a late
// trigger").
constexpr int kEarlyChunks = 2;

// acc[i][r] = x[r] . w_rows[i] over the 16-byte chunks start, start + stride, ... for R rows of
// x and W weight rows of k elements each (bf16, or fp8 with the scale row of each weight row in
// s_rows), summed over the warp (every lane gets the sums). The W rows' loads share one loop.
// Waits for the preceding kernel after the first kEarlyChunks chunks' loads and before anything
// reads x or the scales (so the weights must not be written by the kernel just before on the
// stream), and lets the successor launch only once its loop is done: the successor's blocks and
// their early loads then fill the SMs and memory as this kernel drains, instead of taking warp
// slots and bandwidth from its start (the placement that measured fastest; the notes' "GEMV
// early loads and a late trigger").
// `prefetch`, when given, is loaded into *prefetched right after the wait (a value the caller
// needs only at the end, so its latency hides under the loop).
template <int R, int W, bool kFp8>
__device__ __forceinline__ void Dots(const float* __restrict__ x, int k,
                                     const void* const (&w_rows)[W],
                                     const float* const (&s_rows)[W], int start, int stride,
                                     float (&acc)[W][R], const float* prefetch = nullptr,
                                     float* prefetched = nullptr) {
  constexpr int kPer = kPerChunk<kFp8>;
  const int chunks = k / kPer;
#pragma unroll
  for (int i = 0; i < W; ++i)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[i][r] = 0.0f;
  constexpr int kEarly = kEarlyChunks;
  uint4 early[kEarly][W];
#pragma unroll
  for (int u = 0; u < kEarly; ++u) {
    const int c = start + u * stride;
#pragma unroll
    for (int i = 0; i < W; ++i) {
      if (c < chunks) early[u][i] = LoadWeightChunk(reinterpret_cast<const uint4*>(w_rows[i]) + c);
    }
  }
  detail::WaitOnlyForPrecedingKernel();
  if (prefetch != nullptr) *prefetched = *prefetch;
#pragma unroll
  for (int u = 0; u < kEarly; ++u) {
    const int c = start + u * stride;
    if (c < chunks) Accumulate<R, W, kFp8>(x, k, early[u], s_rows, c, acc);
  }
#pragma unroll 4
  for (int c = start + kEarly * stride; c < chunks; c += stride) {
    uint4 packed[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      packed[i] = LoadWeightChunk(reinterpret_cast<const uint4*>(w_rows[i]) + c);
    }
    Accumulate<R, W, kFp8>(x, k, packed, s_rows, c, acc);
  }
  detail::LetSuccessorLaunch();
#pragma unroll
  for (int i = 0; i < W; ++i)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int off = 16; off > 0; off /= 2)
        acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], off);
}

// Row `row` of a [*, k] weight of `kFp8` type at `w`, and its scale row (fp8) in `scales`.
template <bool kFp8>
__device__ __forceinline__ const void* WeightRow(const void* w, int64_t row, int k) {
  return static_cast<const char*>(w) + row * k * (kFp8 ? 1 : 2);
}
__device__ __forceinline__ const float* ScaleRow(const float* scales, int64_t row, int k) {
  return scales == nullptr ? nullptr
                           : scales + (row / kFp8Block) * ((k + kFp8Block - 1) / kFp8Block);
}

// Sums acc over the `split` warps of each group of the block (warps g * split .. g * split +
// split - 1, each holding its warp-reduced sums over a slice of k) into every warp of the group.
// Every warp of the block calls it (it synchronises the block when split > 1).
template <int W, int R>
__device__ __forceinline__ void SumOverSplit(float (&acc)[W][R], int warp, int split,
                                             float (&part)[kWarps][W * R]) {
  if (split == 1) return;
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < W; ++i)
#pragma unroll
      for (int r = 0; r < R; ++r) part[warp][i * R + r] = acc[i][r];
  }
  __syncthreads();
  const int first = warp - warp % split;
#pragma unroll
  for (int i = 0; i < W; ++i)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int w = 0; w < split; ++w) sum += part[first + w][i * R + r];
      acc[i][r] = sum;
    }
}

// A block's warps in groups of `split`: a group computes F features, each of its warps over a
// slice of k (split > 1 when there are too few feature groups to keep the GPU's memory busy).
struct WarpGroup {
  int group;   // feature group (clamped to the last one: a block's warps all reach SumOverSplit)
  int slice;   // this warp's slice of k
  bool store;  // a real group, and this warp writes its outputs
};
__device__ __forceinline__ WarpGroup GroupOf(int groups, int split) {
  const int warp = threadIdx.x / 32;
  const int group = blockIdx.x * (kWarps / split) + warp / split;
  return {min(group, groups - 1), warp % split, group < groups && warp % split == 0};
}

// The segments with their first group: begin[i] = groups of segments 0 .. i - 1.
struct Segments {
  GemvSegments s;
  int begin[kGemvMaxSegments + 1];
};

// Output features per warp: fp8 rows are half as long, and each chunk of x (64 bytes per 16
// weights) serves F rows' chunks, so the loads of x do not outnumber those of the weights.
template <bool kFp8>
constexpr int kFeatures = kFp8 ? 4 : 1;
// The SiLU-mul GEMV reads 2 rows per feature (gate and up).
template <bool kFp8>
constexpr int kSiluFeatures = kFp8 ? 2 : 1;

template <int R, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32)
    GemvKernel(const float* __restrict__ x, int k, int groups, int split, Segments segs) {
  constexpr int F = kFeatures<kFp8>;
  __shared__ float part[kWarps][F * R];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpGroup g = GroupOf(groups, split);
  const int global = g.group;
  // Constant indices only (unrolled): a runtime index into the parameters copies them to every
  // thread's stack (112 bytes), which took the 4096 x 24576 GEMV from 87% to 55% of bandwidth.
  const void* w = segs.s.w[0];
  const float* scales = segs.s.scales[0];
  float* out = segs.s.out[0];
  int n = segs.s.n[0], begin = 0;
#pragma unroll
  for (int i = 1; i < kGemvMaxSegments; ++i) {
    if (i < segs.s.count && global >= segs.begin[i]) {
      w = segs.s.w[i];
      scales = segs.s.scales[i];
      out = segs.s.out[i];
      n = segs.s.n[i];
      begin = segs.begin[i];
    }
  }
  const int first = (global - begin) * F;
  const void* rows[F];
  const float* scale_rows[F];
#pragma unroll
  for (int f = 0; f < F; ++f) {
    const int row = min(first + f, n - 1);  // past the end: a real row, not stored
    rows[f] = WeightRow<kFp8>(w, row, k);
    scale_rows[f] = ScaleRow(scales, row, k);
  }
  // This lane's output (lane f * R + r stores feature f of row r) and, when adding into it, its
  // value before, loaded right after the wait rather than at the end, so its latency hides under
  // the loop (faster than the add in a norm kernel of its own: the notes' "The residual add in
  // the GEMVs").
  const int lane_f = lane / R, lane_r = lane % R;
  const bool stores = g.store && lane < F * R && first + lane_f < n;
  float* const mine = out + static_cast<int64_t>(lane_r) * n + first + lane_f;
  float before = 0.0f;
  float acc[F][R];
  Dots<R, F, kFp8>(x, k, rows, scale_rows, lane + 32 * g.slice, 32 * split, acc,
                   stores && segs.s.accumulate ? mine : nullptr, &before);
  SumOverSplit(acc, warp, split, part);
#pragma unroll
  for (int f = 0; f < F; ++f)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (stores && lane == f * R + r) *mine = segs.s.accumulate ? before + acc[f][r] : acc[f][r];
    }
}

// act[r, f] = SiLU(x[r] . w[f]) * (x[r] . w[inter + f]): a warp takes gate rows f.. and up rows
// inter + f.. of the stacked [gate; up] weight together.
template <int R, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32)
    GemvSiluMulKernel(const float* __restrict__ x, int k, int inter, const void* __restrict__ w,
                      const float* __restrict__ scales, int split, float* __restrict__ act) {
  constexpr int F = kSiluFeatures<kFp8>;
  __shared__ float part[kWarps][2 * F * R];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpGroup g = GroupOf((inter + F - 1) / F, split);
  const int first = g.group * F;
  const void* rows[2 * F];
  const float* scale_rows[2 * F];
#pragma unroll
  for (int f = 0; f < F; ++f) {
    const int row = min(first + f, inter - 1);
    rows[f] = WeightRow<kFp8>(w, row, k);
    rows[F + f] = WeightRow<kFp8>(w, inter + row, k);
    scale_rows[f] = ScaleRow(scales, row, k);
    scale_rows[F + f] = ScaleRow(scales, inter + row, k);
  }
  float acc[2 * F][R];
  Dots<R, 2 * F, kFp8>(x, k, rows, scale_rows, lane + 32 * g.slice, 32 * split, acc);
  SumOverSplit(acc, warp, split, part);
#pragma unroll
  for (int f = 0; f < F; ++f)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float gate = acc[f][r], up = acc[F + f][r];
      if (g.store && lane == f * R + r && first + f < inter) {
        act[static_cast<int64_t>(r) * inter + first + f] = gate / (1.0f + expf(-gate)) * up;
      }
    }
}

template <bool kFp8>
constexpr int kMinLoads = kFp8 ? 8 : 4;  // SplitFor's floor

// Warps per feature group (1 to a block's 4), for `groups` groups over rows of `chunks` 16-byte
// chunks: enough groups x split warps to keep every SM's memory pipe busy (about 16K warps on an
// H200), but each lane still making at least `min_loads` loads per row, as a warp's start (row
// pointers) and end (sums across lanes and warps) cost the same however little it loads: 8 for
// fp8 (its 4-feature groups over 4096-wide rows would otherwise be split down to one load per
// lane and row), 4 for bf16 (so the tensor-parallel o projection, 4096 x 2048 a rank at TP=2,
// takes two warps a row). Then fewer warps a group where that lets the grid fit in `one_wave`
// (the blocks the GPU holds at once): the blocks all run together instead of a partial second
// wave streaming on part of the SMs (batch-1 q/k/v of the 8B shapes: 1536 blocks instead of
// 3072 where an H200 holds 2112). The notes' "The GEMV split planner" has the measurements.
int SplitFor(int groups, int chunks, int one_wave, int min_loads) {
  constexpr int kTargetWarps = 16384;
  int split = 1;
  while (split < kWarps && int64_t{groups} * split < kTargetWarps &&
         chunks / (32 * split * 2) >= min_loads) {
    split *= 2;
  }
  for (int fewer = split; fewer >= 1; fewer /= 2) {
    if (int64_t{detail::CeilDiv(groups, kWarps / fewer)} <= one_wave) return fewer;
  }
  return split;
}

// The blocks of `kernel` (kWarps warps each) the current GPU holds at once, asked once per
// process and cached in `cached` (its GPUs are of one kind); 0 when CUDA cannot say (no split is
// then narrowed for it).
template <typename Kernel>
int OneWave(Kernel kernel, std::atomic<int>& cached) {
  int wave = cached.load(std::memory_order_relaxed);
  if (wave >= 0) return wave;
  int device = 0, sms = 0, per_sm = 0;
  wave =
      cudaGetDevice(&device) == cudaSuccess &&
              cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
              cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, 0) ==
                  cudaSuccess
          ? sms * per_sm
          : 0;
  if (wave == 0) (void)cudaGetLastError();  // not left for a later launch check to find
  cached.store(wave, std::memory_order_relaxed);
  return wave;
}

// The checks both weight types share; `per` weights per 16-byte chunk.
Status CheckShape(const char* what, int64_t rows, int k, int per) {
  if (rows < 1 || rows > kGemvMaxRows || k % per != 0) {
    return InvalidArgumentError(std::string(what) + ": needs 1.." + std::to_string(kGemvMaxRows) +
                                " rows and k a multiple of " + std::to_string(per) + " (got " +
                                std::to_string(rows) + " rows, k " + std::to_string(k) + ")");
  }
  return Status::Ok();
}

template <bool kFp8>
Status Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
            cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckShape("gemv", rows, k, kPerChunk<kFp8>));
  if (segments.count < 1 || segments.count > kGemvMaxSegments) {
    return InvalidArgumentError("gemv: 1.." + std::to_string(kGemvMaxSegments) + " weights (got " +
                                std::to_string(segments.count) + ")");
  }
  Segments segs{segments, {0}};
  for (int i = 0; i < segments.count; ++i) {
    segs.begin[i + 1] =
        segs.begin[i] + static_cast<int>(detail::CeilDiv(segments.n[i], kFeatures<kFp8>));
  }
  const int groups = segs.begin[segments.count];
  if (groups <= 0) return Status::Ok();
  void (*const by_rows[])(const float*, int, int, int, Segments) = {
      GemvKernel<1, kFp8>, GemvKernel<2, kFp8>, GemvKernel<3, kFp8>, GemvKernel<4, kFp8>};
  static std::atomic<int> waves[kGemvMaxRows] = {-1, -1, -1, -1};
  const int split = SplitFor(groups, k / kPerChunk<kFp8>,
                             OneWave(by_rows[rows - 1], waves[rows - 1]), kMinLoads<kFp8>);
  const unsigned blocks = static_cast<unsigned>(detail::CeilDiv(groups, kWarps / split));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(by_rows[rows - 1], blocks, kWarps * 32, 0,
                                                     stream, x, k, groups, split, segs));
  return Status::Ok();
}

template <bool kFp8>
Status SiluMul(const float* x, int64_t rows, int k, const void* w, const float* scales, int inter,
               float* act, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckShape("gemv + silu-mul", rows, k, kPerChunk<kFp8>));
  if (inter <= 0) return Status::Ok();
  const int groups = static_cast<int>(detail::CeilDiv(inter, kSiluFeatures<kFp8>));
  void (*const by_rows[])(const float*, int, int, const void*, const float*, int, float*) = {
      GemvSiluMulKernel<1, kFp8>, GemvSiluMulKernel<2, kFp8>, GemvSiluMulKernel<3, kFp8>,
      GemvSiluMulKernel<4, kFp8>};
  static std::atomic<int> waves[kGemvMaxRows] = {-1, -1, -1, -1};
  const int split = SplitFor(groups, k / kPerChunk<kFp8>,
                             OneWave(by_rows[rows - 1], waves[rows - 1]), kMinLoads<kFp8>);
  const unsigned blocks = static_cast<unsigned>(detail::CeilDiv(groups, kWarps / split));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(by_rows[rows - 1], blocks, kWarps * 32, 0,
                                                     stream, x, k, inter, w, scales, split, act));
  return Status::Ok();
}

GemvSegments One(const void* w, const float* scales, int n, float* out) {
  GemvSegments one;
  one.count = 1;
  one.w[0] = w;
  one.scales[0] = scales;
  one.out[0] = out;
  one.n[0] = n;
  return one;
}

}  // namespace

Status GemvBf16Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
                    cudaStream_t stream) {
  return Many<false>(x, rows, k, segments, stream);
}

Status GemvBf16SiluMul(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int inter,
                       float* act, cudaStream_t stream) {
  return SiluMul<false>(x, rows, k, w, nullptr, inter, act, stream);
}

Status GemvBf16(const float* x, int64_t rows, int k, const __nv_bfloat16* w, int n, float* out,
                cudaStream_t stream) {
  return Many<false>(x, rows, k, One(w, nullptr, n, out), stream);
}

Status GemvFp8Many(const float* x, int64_t rows, int k, const GemvSegments& segments,
                   cudaStream_t stream) {
  return Many<true>(x, rows, k, segments, stream);
}

Status GemvFp8SiluMul(const float* x, int64_t rows, int k, const uint8_t* w, const float* scales,
                      int inter, float* act, cudaStream_t stream) {
  return SiluMul<true>(x, rows, k, w, scales, inter, act, stream);
}

Status GemvFp8(const float* x, int64_t rows, int k, const uint8_t* w, const float* scales, int n,
               float* out, cudaStream_t stream) {
  return Many<true>(x, rows, k, One(w, scales, n, out), stream);
}

}  // namespace spark::kernels
