// QuantGemm (quant_gemm.h): per block, one 16-row weight tile (two for SwiGLU: the gate rows and
// the matching up rows) against one work item's tokens, in tiles of 8 tokens (mma n = 8). The
// warps take every fourth (or eighth) k chunk and sum through shared memory at the end.
//
// Fragment layout trick: a product does not care in which order k is summed, so each lane loads
// a contiguous 16-byte slice of its two weight rows (rows lane / 4 and lane / 4 + 8) and the
// same k range of its token (lane / 4): lane t = lane % 4 holds k values [t * 4S, (t + 1) * 4S)
// of a chunk of 16 S (S = k16 steps per chunk: 2 for bf16, 4 for E4M3, 8 for E2M1), and step s
// uses its values 4s .. 4s + 3 as the logical k columns 2t, 2t + 1, 2t + 8, 2t + 9 of an
// m16n8k16 product, for the weights and the activations alike (E2M1 pairs its values in
// another order, and permutes the activations to match: SliceDecoder). So every load is a
// 16-byte vector and no shuffle or shared-memory staging is needed. The weights are decoded a
// k16 step at a time when one token tile uses them, which keeps the raw slices, not the decoded
// ones, in registers across the loads.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/mma.cuh"
#include "kernels/quant_gemm.h"

namespace spark::kernels {
namespace {

// Warps of a block, which split k: four, and eight for tiles of up to 16 tokens when the grid is
// too small to give every SM several blocks (one matrix at decode batches: more warps a row tile
// keep more loads in flight). A grid of many blocks (expert lists) runs faster in blocks of four.
constexpr int kMostWarps = 8;
int WarpsFor(int tiles, int64_t blocks, int sms) {
  return tiles <= 2 && blocks < 4 * sms ? kMostWarps : 4;
}

template <QuantFormat F>
struct Format;
template <>
struct Format<QuantFormat::kBf16> {
  static constexpr int kSteps = 2;  // 8 bf16 per lane slice
};
template <>
struct Format<QuantFormat::kE4M3B32> {
  static constexpr int kSteps = 4;  // 16 E4M3 bytes
};
template <>
struct Format<QuantFormat::kE2M1B32> {
  static constexpr int kSteps = 8;  // 32 E2M1 nibbles
};

// 2^(e - 127) of a UE8M0 byte (e = 255, NaN in the format, is not expected in weights).
__device__ __forceinline__ float Ue8m0(uint8_t e) { return exp2f(static_cast<float>(e) - 127.0f); }

// Byte offset of the lane slice starting at column kc of row r.
template <QuantFormat F>
__device__ __forceinline__ int64_t SliceOffset(int64_t r, int k, int kc) {
  if constexpr (F == QuantFormat::kBf16) return (r * k + kc) * 2;
  if constexpr (F == QuantFormat::kE4M3B32) return r * k + kc;
  return (r * k + kc) / 2;
}

// The UE8M0 scale code of the lane slice at column kc of row r (bf16: none, 127 = 1).
template <QuantFormat F>
__device__ __forceinline__ uint8_t SliceScaleCode(const QuantMatrix& w, int64_t r, int kc) {
  if constexpr (F == QuantFormat::kBf16) return 127;
  const int kb = (w.k + kQuantBlock - 1) / kQuantBlock;
  if constexpr (F == QuantFormat::kE4M3B32) return __ldg(w.scales + (r / kQuantBlock) * kb + kc / kQuantBlock);
  return __ldg(w.scales + r * kb + kc / kQuantBlock);
}

// The two bf16 pairs step `st` of an m16n8k16 product takes from a 16-byte slice (slice values
// 4 st .. 4 st + 3), times the slice's scale. Decoding one step at a time keeps only the raw
// slices in registers between the loads and the products.
template <QuantFormat F>
struct SliceDecoder {
  __device__ __forceinline__ explicit SliceDecoder(float) {}
  __device__ __forceinline__ void Step(const uint4& raw, int st, uint32_t& p0, uint32_t& p1) const {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    p0 = w[2 * st], p1 = w[2 * st + 1];
  }
};

template <>
struct SliceDecoder<QuantFormat::kE4M3B32> {
  float scale;
  __device__ __forceinline__ explicit SliceDecoder(float s) : scale(s) {}
  __device__ __forceinline__ void Step(const uint4& raw, int st, uint32_t& p0, uint32_t& p1) const {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    const float2 a = detail::Fp8x2ToFloat2(static_cast<__nv_fp8x2_storage_t>(w[st]));
    const float2 b = detail::Fp8x2ToFloat2(static_cast<__nv_fp8x2_storage_t>(w[st] >> 16));
    p0 = detail::PackBf16(a.x * scale, a.y * scale);
    p1 = detail::PackBf16(b.x * scale, b.y * scale);
  }
};

// E2M1: a nibble s.ee.m placed as bf16 bits s.000000ee.m000000 is its value times 2^-126
// (normal and subnormal alike, and exact). Nibbles i and i + 4 of a 32-bit word sit 16 bits
// apart, so one shift pair and two masks place both halves of a bf16 pair at once; a word's
// eight values become the pairs (0, 4), (1, 5), (2, 6), (3, 7), and the activations are
// permuted the same way (PermuteActivations). One bf16x2 multiply by scale * 2^126 then puts
// the 2^126 back with the scale (exact: the scale is a power of two); past scale 2 the
// multiplier would overflow bf16, so the two factors go separately.
template <>
struct SliceDecoder<QuantFormat::kE2M1B32> {
  __nv_bfloat162 first, second;
  bool twice;
  __device__ __forceinline__ explicit SliceDecoder(float scale) : twice(scale >= 2.0f) {
    first = __float2bfloat162_rn(twice ? 0x1p126f : scale * 0x1p126f);
    second = __float2bfloat162_rn(scale);
  }
  __device__ __forceinline__ uint32_t Scaled(uint32_t bits) const {
    __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&bits), first);
    if (twice) v = __hmul2(v, second);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ void Step(const uint4& raw, int st, uint32_t& p0, uint32_t& p1) const {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    const uint32_t word = w[st / 2];
    constexpr uint32_t kSign = 0x80008000u, kMag = 0x01C001C0u;
    if (st % 2 == 0) {  // pairs (0, 4) and (1, 5)
      p0 = Scaled(((word << 12) & kSign) | ((word << 6) & kMag));
      p1 = Scaled(((word << 8) & kSign) | ((word << 2) & kMag));
    } else {  // pairs (2, 6) and (3, 7)
      p0 = Scaled(((word << 4) & kSign) | ((word >> 2) & kMag));
      p1 = Scaled((word & kSign) | ((word >> 6) & kMag));
    }
  }
};

// The activation pairs in the order the weights decode to: as loaded, words 4i .. 4i + 3 hold
// values (0, 1), (2, 3), (4, 5), (6, 7) of an 8-value group; E2M1 wants (0, 4), (1, 5), (2, 6),
// (3, 7).
template <QuantFormat F, int kWords>
__device__ __forceinline__ void PermuteActivations(uint32_t (&xv)[kWords]) {
  if constexpr (F == QuantFormat::kE2M1B32) {
#pragma unroll
    for (int i = 0; i < kWords; i += 4) {
      const uint32_t a = xv[i], b = xv[i + 1], c = xv[i + 2], d = xv[i + 3];
      xv[i] = __byte_perm(a, c, 0x5410);
      xv[i + 1] = __byte_perm(a, c, 0x7632);
      xv[i + 2] = __byte_perm(b, d, 0x5410);
      xv[i + 3] = __byte_perm(b, d, 0x7632);
    }
  }
}

// The work item of this block: its matrix, first list position and token count.
__device__ __forceinline__ bool BlockWork(const QuantGemmArgs& a, int tile_tokens, QuantWork* w) {
  if (a.work == nullptr) {
    const int64_t first = int64_t{blockIdx.x} * tile_tokens;
    if (first >= a.tokens) return false;
    *w = {0, static_cast<int32_t>(first),
          static_cast<int32_t>((a.tokens - first < tile_tokens ? a.tokens - first : int64_t{tile_tokens}))};
    return true;
  }
  if (static_cast<int>(blockIdx.x) >= *a.work_count) return false;
  *w = a.work[blockIdx.x];
  return w->count > 0;
}

template <QuantFormat F, int kTiles, int kWarps, bool kSwiGlu, bool kSplit>
__global__ void __launch_bounds__(kWarps * 32)
    QuantGemmKernel(QuantGemmArgs a) {
  constexpr int kSteps = Format<F>::kSteps;
  constexpr int kLaneK = 4 * kSteps;   // k values of a lane slice
  constexpr int kChunk = 4 * kLaneK;   // k values a warp takes per step of its loop
  constexpr int kSets = kSwiGlu ? 2 : 1;
  constexpr int kAcc = kSets * kTiles * 4;
  __shared__ float partial[kWarps][kAcc][32];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  QuantWork work;
  if (!BlockWork(a, kTiles * 8, &work)) return;
  const QuantMatrix w = a.matrices != nullptr ? a.matrices[work.matrix] : a.single;
  const int k = w.k;
  const int half = kSwiGlu ? w.n / 2 : w.n;
  const int r0 = blockIdx.y * 16;  // first row of the tile (of the gate half for SwiGLU)
  const int group = a.group_rows > 0 ? r0 / a.group_rows : 0;
  const auto* codes = static_cast<const uint8_t*>(w.codes);

  // This lane's rows: set 0 (and the up rows, set 1, for SwiGLU), rows g and g + 8.
  int64_t rows[kSets][2];
  bool row_ok[kSets][2];
#pragma unroll
  for (int s = 0; s < kSets; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + g + 8 * h;
      row_ok[s][h] = r < half;
      rows[s][h] = r + s * half;
    }
  }
  // This lane's token of each tile: its activation row, or -1 past the item's count.
  int64_t x_row[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    const int j = i * 8 + g;
    const int pos = work.first + j;
    x_row[i] = j < work.count ? (a.x_rows != nullptr ? a.x_rows[pos] : pos) : -1;
  }
  const __nv_bfloat16* x = a.x + int64_t{group} * k;
  const __nv_bfloat16* x_lo = kSplit ? a.x_lo + int64_t{group} * k : nullptr;

  float acc[kSets][kTiles][4] = {};
  const int chunks = (k + kChunk - 1) / kChunk;
  constexpr int kParts = kSplit ? 2 : 1;
  // What a chunk's products read from memory: the weight slices and their scale codes (the
  // activations, read by every warp, come from L1 as the products need them).
  struct Chunk {
    uint4 raw[kSets][2];
    uint8_t scale[kSets][2];
  };
  auto activations = [&](int c, int i, uint32_t (&xv)[kParts][2 * kSteps]) {
    const int kc = c * kChunk + t * kLaneK;
#pragma unroll
    for (int part = 0; part < kParts; ++part) {
      const __nv_bfloat16* src = part == 0 ? x : x_lo;
#pragma unroll
      for (int v = 0; v < kSteps / 2; ++v) {
        uint4 q = make_uint4(0, 0, 0, 0);
        if (kc < k && x_row[i] >= 0) {
          q = __ldg(reinterpret_cast<const uint4*>(src + x_row[i] * a.ldx + kc) + v);
        }
        uint32_t* dst = xv[part] + 4 * v;
        dst[0] = q.x, dst[1] = q.y, dst[2] = q.z, dst[3] = q.w;
      }
      PermuteActivations<F>(xv[part]);
    }
  };
  // Slices past k or the matrix's rows load as zeros, which decode to zero whatever the scale.
  auto load = [&](int c, Chunk& ch) {
    const int kc = c * kChunk + t * kLaneK;
#pragma unroll
    for (int s = 0; s < kSets; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ch.raw[s][h] = make_uint4(0, 0, 0, 0);
        ch.scale[s][h] = 127;
        if (c < chunks && kc < k && row_ok[s][h]) {
          ch.raw[s][h] = __ldg(reinterpret_cast<const uint4*>(codes + SliceOffset<F>(rows[s][h], k, kc)));
          ch.scale[s][h] = SliceScaleCode<F>(w, rows[s][h], kc);
        }
      }
    }
  };

  // One chunk's products: the weights decoded once per chunk when several token tiles share
  // them, step by step when one tile does (fewer registers live).
  auto product = [&](float (&out)[4], const uint32_t (&af)[4],
                     const uint32_t (&xv)[kParts][2 * kSteps], int st) {
#pragma unroll
    for (int part = 0; part < kParts; ++part) {
      detail::MmaBf16(out, af, xv[part][2 * st], xv[part][2 * st + 1]);
    }
  };
  auto compute = [&](int c, const Chunk& ch) {
    float scale[kSets][2];
#pragma unroll
    for (int s = 0; s < kSets; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) scale[s][h] = Ue8m0(ch.scale[s][h]);
    if constexpr (kTiles == 1) {
      uint32_t xv[kParts][2 * kSteps];
      activations(c, 0, xv);
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
#pragma unroll
        for (int s = 0; s < kSets; ++s) {
          uint32_t af[4];
          SliceDecoder<F>(scale[s][0]).Step(ch.raw[s][0], st, af[0], af[2]);
          SliceDecoder<F>(scale[s][1]).Step(ch.raw[s][1], st, af[1], af[3]);
          product(acc[s][0], af, xv, st);
        }
      }
    } else {
      uint32_t wa[kSets][2][2 * kSteps];
#pragma unroll
      for (int s = 0; s < kSets; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const SliceDecoder<F> d(scale[s][h]);
#pragma unroll
          for (int st = 0; st < kSteps; ++st) d.Step(ch.raw[s][h], st, wa[s][h][2 * st], wa[s][h][2 * st + 1]);
        }
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        uint32_t xv[kParts][2 * kSteps];
        activations(c, i, xv);
#pragma unroll
        for (int st = 0; st < kSteps; ++st) {
#pragma unroll
          for (int s = 0; s < kSets; ++s) {
            const uint32_t af[4] = {wa[s][0][2 * st], wa[s][1][2 * st], wa[s][0][2 * st + 1],
                                    wa[s][1][2 * st + 1]};
            product(acc[s][i], af, xv, st);
          }
        }
      }
    }
  };

  // A ring of two chunks: each slot is computed, then refilled with the chunk two steps ahead,
  // so one chunk's loads stay in flight while the other computes.
  const int first_chunk = static_cast<int>(blockIdx.z) * kWarps + warp;
  const int chunk_step = kWarps * static_cast<int>(gridDim.z);
  constexpr int kDepth = 2;
  Chunk ring[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) load(first_chunk + d * chunk_step, ring[d]);
  for (int c0 = first_chunk; c0 < chunks; c0 += kDepth * chunk_step) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int c = c0 + d * chunk_step;
      if (c < chunks) compute(c, ring[d]);
      load(c + kDepth * chunk_step, ring[d]);
    }
  }

  // Sum the four warps' partial sums; warp i % 4 finishes tile i.
#pragma unroll
  for (int s = 0; s < kSets; ++s)
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp][(s * kTiles + i) * 4 + e][lane] = acc[s][i][e];
  __syncthreads();
  for (int i = warp; i < kTiles; i += kWarps) {
    float sum[kSets][4];
#pragma unroll
    for (int s = 0; s < kSets; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = 0.0f;
#pragma unroll
        for (int p = 0; p < kWarps; ++p) v += partial[p][(s * kTiles + i) * 4 + e][lane];
        sum[s][e] = v;
      }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2, j = i * 8 + 2 * t + e % 2;
      if (!row_ok[0][h] || j >= work.count) continue;
      const int pos = work.first + j;
      const int64_t orow = a.out_rows != nullptr ? a.out_rows[pos] : pos;
      const int col = r0 + g + 8 * h;
      float v = sum[0][e];
      if (gridDim.z > 1) {  // partial sums, SwiGLU's gate and up apart: SplitReduceKernel adds them
        const int64_t at = (int64_t{blockIdx.z} * a.tokens + orow) * (kSwiGlu ? w.n : a.ldo) + col;
        a.split_out[at] = v;
        if constexpr (kSwiGlu) a.split_out[at + half] = sum[kSets - 1][e];
        continue;
      }
      if constexpr (kSwiGlu) {
        v = detail::ClampedSwiGlu(v, sum[kSets - 1][e], a.limit);
      } else {
        if (a.epilogue == QuantGemmArgs::Epilogue::kScale) v *= a.row_scale[orow];
      }
      const int64_t at = orow * a.ldo + col;
      if (a.out_bf16 != nullptr) {
        a.out_bf16[at] = __float2bfloat16_rn(v);
      } else if (a.accumulate) {
        a.out[at] += v;
      } else {
        a.out[at] = v;
      }
    }
  }
}

// The k splits' partial sums added in split order (deterministic), then stored as the GEMM's
// epilogue would: `outs` columns a token; for SwiGLU the parts hold gate and up columns apart
// (a stride of 2 outs).
__global__ void SplitReduceKernel(QuantGemmArgs a, int outs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= a.tokens * outs) return;
  const int64_t token = i / outs;
  const int col = static_cast<int>(i % outs);
  const bool swiglu = a.epilogue == QuantGemmArgs::Epilogue::kSwiGlu;
  const int64_t stride = swiglu ? 2 * int64_t{outs} : a.ldo;
  float v = 0.0f, up = 0.0f;
  for (int z = 0; z < a.k_splits; ++z) {
    const float* part = a.split_out + (z * a.tokens + token) * stride + col;
    v += part[0];
    if (swiglu) up += part[outs];
  }
  if (swiglu) v = detail::ClampedSwiGlu(v, up, a.limit);
  const int64_t at = token * a.ldo + col;
  if (a.out_bf16 != nullptr) {
    a.out_bf16[at] = __float2bfloat16_rn(v);
  } else {
    a.out[at] = a.accumulate ? a.out[at] + v : v;
  }
}

// Streaming multiprocessors of the current device (asked once per device).
int SmCount() {
  static int cached[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  int& c = cached[device % 64];
  if (c == 0 && cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    c = 132;
  }
  return c;
}

template <QuantFormat F, int kTiles, int kWarps>
void LaunchWith(dim3 grid, bool swiglu, bool split, const QuantGemmArgs& a, cudaStream_t stream) {
  constexpr int kThreads = kWarps * 32;
  if (swiglu && split) {
    QuantGemmKernel<F, kTiles, kWarps, true, true><<<grid, kThreads, 0, stream>>>(a);
  } else if (swiglu) {
    QuantGemmKernel<F, kTiles, kWarps, true, false><<<grid, kThreads, 0, stream>>>(a);
  } else if (split) {
    QuantGemmKernel<F, kTiles, kWarps, false, true><<<grid, kThreads, 0, stream>>>(a);
  } else {
    QuantGemmKernel<F, kTiles, kWarps, false, false><<<grid, kThreads, 0, stream>>>(a);
  }
}

template <QuantFormat F, int kTiles>
Status Launch(const QuantGemmArgs& a, cudaStream_t stream) {
  const bool swiglu = a.epilogue == QuantGemmArgs::Epilogue::kSwiGlu;
  const int rows = swiglu ? a.single.n / 2 : a.single.n;
  const int64_t items =
      a.work != nullptr ? a.max_work : (a.tokens + kTiles * 8 - 1) / (kTiles * 8);
  if (items <= 0 || rows <= 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(items), static_cast<unsigned>((rows + 15) / 16),
                  static_cast<unsigned>(std::max(1, a.k_splits)));
  const bool split = a.x_lo != nullptr;
  const int64_t blocks = int64_t{grid.x} * grid.y * grid.z;
  if constexpr (kTiles <= 2) {  // only decode tiles take kMostWarps (WarpsFor)
    if (WarpsFor(kTiles, blocks, SmCount()) == kMostWarps) {
      LaunchWith<F, kTiles, kMostWarps>(grid, swiglu, split, a, stream);
    } else {
      LaunchWith<F, kTiles, 4>(grid, swiglu, split, a, stream);
    }
  } else {
    LaunchWith<F, kTiles, 4>(grid, swiglu, split, a, stream);
  }
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  if (a.k_splits > 1) {
    SplitReduceKernel<<<detail::CeilDiv(a.tokens * rows, 256), 256, 0, stream>>>(a, rows);
    SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  return Status::Ok();
}

template <QuantFormat F>
Status LaunchFormat(const QuantGemmArgs& a, cudaStream_t stream) {
  switch (QuantGemmTileTokens(a.tokens)) {
    case 8:
      return Launch<F, 1>(a, stream);
    case 16:
      return Launch<F, 2>(a, stream);
    case 32:
      return Launch<F, 4>(a, stream);
    default:
      return Launch<F, 8>(a, stream);
  }
}

int LaneK(QuantFormat f) {
  switch (f) {
    case QuantFormat::kBf16:
      return 8;
    case QuantFormat::kE4M3B32:
      return 16;
    case QuantFormat::kE2M1B32:
      return 32;
  }
  return 32;
}

// One thread: 8 consecutive values of a row, decoded (E2M1 through the bit placement the GEMM
// uses: the nibble's bits as fp32 bits are its value times 2^-126).
__device__ __forceinline__ void Decode8(const QuantMatrix& w, int64_t r, int kc, float (&v)[8]) {
  const int kb = (w.k + kQuantBlock - 1) / kQuantBlock;
  const auto* codes = static_cast<const uint8_t*>(w.codes);
  if (w.format == QuantFormat::kE4M3B32) {
    const float s = Ue8m0(w.scales[(r / kQuantBlock) * kb + kc / kQuantBlock]);
    const uint2 raw = *reinterpret_cast<const uint2*>(codes + r * w.k + kc);
    const uint32_t words[2] = {raw.x, raw.y};
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f =
          detail::Fp8x2ToFloat2(static_cast<__nv_fp8x2_storage_t>(words[p / 2] >> (16 * (p % 2))));
      v[2 * p] = f.x * s, v[2 * p + 1] = f.y * s;
    }
  } else {
    const float s = Ue8m0(w.scales[r * kb + kc / kQuantBlock]);
    const uint32_t word = *reinterpret_cast<const uint32_t*>(codes + (r * w.k + kc) / 2);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const uint32_t nib = (word >> (4 * q)) & 0xFu;
      v[q] = __uint_as_float(((nib & 8u) << 28) | ((nib & 7u) << 22)) * 0x1p126f * s;
    }
  }
}

template <typename T>
__global__ void DequantKernel(QuantMatrix w, T* out) {
  const int64_t slices_per_row = w.k / 8;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= int64_t{w.n} * slices_per_row) return;
  const int64_t r = i / slices_per_row;
  const int kc = static_cast<int>(i % slices_per_row) * 8;
  float v[8];
  Decode8(w, r, kc, v);
  T* dst = out + r * w.k + kc;
  if constexpr (sizeof(T) == 2) {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(detail::PackBf16(v[0], v[1]), detail::PackBf16(v[2], v[3]),
                   detail::PackBf16(v[4], v[5]), detail::PackBf16(v[6], v[7]));
  } else {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

__global__ void SplitKernel(const float4* __restrict__ x, int64_t quads, uint2* __restrict__ hi,
                            uint2* __restrict__ lo) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= quads) return;
  const float4 v = x[i];
  const float f[4] = {v.x, v.y, v.z, v.w};
  float h[4], l[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    h[j] = __bfloat162float(__float2bfloat16_rn(f[j]));
    l[j] = f[j] - h[j];
  }
  hi[i] = make_uint2(detail::PackBf16(h[0], h[1]), detail::PackBf16(h[2], h[3]));
  lo[i] = make_uint2(detail::PackBf16(l[0], l[1]), detail::PackBf16(l[2], l[3]));
}

template <typename T>
Status Dequant(const QuantMatrix& w, T* out, cudaStream_t stream) {
  if (w.k % 8 != 0) return InvalidArgumentError("dequant: k must be a multiple of 8");
  const int64_t threads = int64_t{w.n} * (w.k / 8);
  if (threads == 0) return Status::Ok();
  DequantKernel<T><<<detail::CeilDiv(threads, 256), 256, 0, stream>>>(w, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

int QuantGemmKSplits(const QuantMatrix& w, int64_t tokens) {
  const int tile = QuantGemmTileTokens(tokens);
  const int64_t blocks = (tokens + tile - 1) / tile * ((w.n + 15) / 16);
  const int warps = WarpsFor(tile / 8, blocks, SmCount());
  const int64_t chunks = (w.k + 4 * LaneK(w.format) - 1) / (4 * LaneK(w.format));
  // Two blocks per SM, at least two chunks a warp in each split, at most eight splits.
  const int64_t want = (2 * SmCount() + blocks - 1) / blocks;
  const int64_t most = std::max<int64_t>(1, chunks / (2 * warps));
  return static_cast<int>(std::clamp<int64_t>(std::min(want, most), 1, 8));
}

int QuantGemmTileTokens(int64_t tokens) {
  if (tokens <= 8) return 8;
  if (tokens <= 16) return 16;
  if (tokens <= 32) return 32;
  return 64;
}

Status QuantGemm(const QuantGemmArgs& a, cudaStream_t stream) {
  const QuantMatrix& w = a.single;
  const bool swiglu = a.epilogue == QuantGemmArgs::Epilogue::kSwiGlu;
  auto shape = [&] {
    return "[" + std::to_string(w.n) + ", " + std::to_string(w.k) + "]";
  };
  if (w.k <= 0 || w.k % LaneK(w.format) != 0) {
    return InvalidArgumentError("quant gemm: k of " + shape() + " must be a positive multiple of " +
                                std::to_string(LaneK(w.format)));
  }
  if (a.ldx % 8 != 0 || (a.group_rows > 0 && a.group_rows % 16 != 0)) {
    return InvalidArgumentError("quant gemm: activation stride " + std::to_string(a.ldx) +
                                " must be a multiple of 8 and group rows " +
                                std::to_string(a.group_rows) + " of 16");
  }
  if (swiglu && (w.n % 2 != 0 || (w.n / 2) % 16 != 0)) {
    return InvalidArgumentError("quant gemm: a SwiGLU weight " + shape() +
                                " needs a multiple of 16 rows per half");
  }
  if ((a.out == nullptr) == (a.out_bf16 == nullptr)) {
    return InvalidArgumentError("quant gemm: exactly one of out and out_bf16");
  }
  if (a.k_splits > 1 &&
      (a.work != nullptr || a.epilogue == QuantGemmArgs::Epilogue::kScale ||
       a.split_out == nullptr || (a.accumulate && a.out == nullptr))) {
    return InvalidArgumentError(
        "quant gemm: k splits take a dense store or SwiGLU (no work list, no row scales) with "
        "scratch");
  }
  if (a.epilogue == QuantGemmArgs::Epilogue::kScale && a.row_scale == nullptr) {
    return InvalidArgumentError("quant gemm: the scale epilogue needs row_scale");
  }
  switch (w.format) {
    case QuantFormat::kBf16:
      return LaunchFormat<QuantFormat::kBf16>(a, stream);
    case QuantFormat::kE4M3B32:
      return LaunchFormat<QuantFormat::kE4M3B32>(a, stream);
    case QuantFormat::kE2M1B32:
      return LaunchFormat<QuantFormat::kE2M1B32>(a, stream);
  }
  return InvalidArgumentError("quant gemm: unknown format");
}

Status DequantToBf16(const QuantMatrix& w, __nv_bfloat16* out, cudaStream_t stream) {
  if (w.format == QuantFormat::kBf16) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, w.codes, size_t(w.n) * w.k * 2,
                                               cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  }
  return Dequant(w, out, stream);
}

Status DequantToF32(const QuantMatrix& w, float* out, cudaStream_t stream) {
  if (w.format == QuantFormat::kBf16) {
    return InvalidArgumentError("dequant: bf16 matrices widen with CastBf16ToF32");
  }
  return Dequant(w, out, stream);
}

Status SplitBf16(const float* x, size_t count, __nv_bfloat16* hi, __nv_bfloat16* lo,
                 cudaStream_t stream) {
  if (count % 4 != 0) return InvalidArgumentError("split bf16: count must be a multiple of 4");
  const int64_t quads = static_cast<int64_t>(count / 4);
  if (quads == 0) return Status::Ok();
  SplitKernel<<<detail::CeilDiv(quads, 256), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(x), quads, reinterpret_cast<uint2*>(hi),
      reinterpret_cast<uint2*>(lo));
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace spark::kernels
