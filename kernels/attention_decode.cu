// Paged decode attention with split-K on CUDA cores (bf16 caches go to attention_decode_mma.cu
// when the layout allows bf16 tensor cores). A block (4 warps) takes one query row, one KV head,
// the query heads that share it (up to kGroup<kD> of them, so each K/V row is read once for the
// group) and one slice of at most kMaxSplitLen context tokens, in three passes:
//  0. the slice's cache slots into shared memory (no table lookups in the hot loops);
//  1. scores: 8 lanes per token for an fp32 cache, 16 for a bf16 one (each lane holds its share
//     of q and of a K row, 16-byte loads), 4 or 2 tokens per warp at a time and several of those
//     in flight, a shuffle reduction; scores go to shared memory;
//  2. softmax over the slice: block max and sum per head, p = exp(s - max) in place;
//  3. values: 16-byte loads (one or two V rows per warp step), p from shared memory,
//     eight steps in flight per warp; the warps' sums merge in shared memory.
// With several splits a second kernel merges the splits' (max, sum, unnormalised output).
#include <algorithm>

#include "kernels/attention.h"
#include "kernels/attention_decode_mma.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

using detail::FromFloat;
using detail::ToFloat;

constexpr int kWarps = 4;
// Lanes that share one K row in the score pass: a lane's part of a row is 16 bytes (bf16) or
// 64 bytes (fp32) of a 128-wide head.
template <typename C>
constexpr int kLanesPerToken = sizeof(C) == 2 ? 16 : 8;
constexpr int kMaxSplitLen = 512;
// Shorter splits cost more in launch, merge and combine than they gain in parallelism: the
// tensor-core kernel over a bf16 cache takes splits of 256 tokens or more, the CUDA-core kernels
// (fp32 cache) keep 64, where they are faster (bench/engine/CUDA_BACKEND_NOTES.md, "Short-
// context decode splits").
constexpr int kMinSplitLen = 256;
constexpr int kMinSplitLenCudaCores = 64;
// Value-pass steps in flight per warp (16 bytes per lane each).
template <typename C>
constexpr int kVUnroll = sizeof(C) == 2 ? 4 : 8;

// Token sets in flight per warp in the score pass (two K rows per lane for fp32, four for bf16;
// more costs registers and occupancy: bench/engine/CUDA_BACKEND_NOTES.md).
template <typename C>
constexpr int kKUnroll = sizeof(C) == 2 ? 4 : 2;

// Blocks per SM the register budget must allow: a bf16 slice is half the bytes of an fp32 one
// for the same instructions, so it needs more warps to keep enough loads in flight (measured
// for 128-wide heads; narrower ones serve 8 query heads per block and need the registers).
template <typename C, int kD>
constexpr int kMinBlocks = sizeof(C) == 2 && kD == 128 ? 5 : 1;

// Query heads per block for heads up to kD wide: q stays within 64 registers.
template <int kD>
constexpr int kGroup = kD >= 256 ? 2 : (kD >= 128 ? 4 : 8);

template <typename T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  T v[kN];
};

// dst[i] = p[d0 + i] for the kN elements from d0, in vectors of up to 16 bytes; elements at or
// past D read as 0. p + d0 must be aligned to the vector (D is a multiple of it).
template <typename T, int kN>
__device__ __forceinline__ void LoadPart(const T* p, int d0, int D, float (&dst)[kN]) {
  constexpr int kVec = kN * sizeof(T) >= 16 ? 16 / sizeof(T) : kN;
#pragma unroll
  for (int c = 0; c < kN / kVec; ++c) {
    const int d = d0 + c * kVec;
    if (d + kVec <= D) {
      const Vec<T, kVec> v = *reinterpret_cast<const Vec<T, kVec>*>(p + d);
#pragma unroll
      for (int i = 0; i < kVec; ++i) dst[c * kVec + i] = ToFloat(v.v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) dst[c * kVec + i] = 0.0f;
    }
  }
}

template <typename T, typename C, int kE>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<C, kE * kLanesPerToken<C>>)
    DecodeKernel(const T* __restrict__ q, DecodeRows rows, const C* __restrict__ k_cache,
                 const C* __restrict__ v_cache, PagedKvLayout layout, int group_chunks, int splits,
                 int split_len, float* __restrict__ partial, T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  constexpr int kL = kLanesPerToken<C>;
  constexpr int kTokensPerWarp = 32 / kL;
  constexpr int kD = kE * kL;  // widest head served
  constexpr int kG = kGroup<kD>;
  constexpr int kDpl = kD >= 32 ? kD / 32 : 1;  // elements per lane in the value pass
  __shared__ float red[32];
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i_row = blockIdx.y;
  const int kvh = blockIdx.x / group_chunks;
  const int group = layout.num_heads / layout.num_kv_heads;
  const int g0 = (blockIdx.x % group_chunks) * kG;
  const int ng = min(kG, group - g0);
  const int D = layout.head_dim;
  const int64_t q_row = rows.row_ids != nullptr ? rows.row_ids[i_row] : i_row;
  const int len = rows.kv_len[i_row];
  const int begin = blockIdx.z * split_len;
  const int n = max(0, min(len, begin + split_len) - begin);
  const int32_t* table = rows.block_tables + rows.table_offset[i_row];
  const int64_t kv_width = int64_t{layout.num_kv_heads} * D;
  const int64_t head_off = int64_t{kvh} * D;
  const int h0 = kvh * group + g0;
  const int bs = layout.block_size;
  float* scores = smem;                                                  // [kG][split_len]
  float* merge = smem + kG * split_len;                                  // [kWarps][kG][D]
  int32_t* slots = reinterpret_cast<int32_t*>(merge + kWarps * kG * D);  // [split_len]

  // Pass 0: slots.
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    slots[t] = static_cast<int32_t>(detail::CacheSlot(table, begin + t, bs));
  }
  __syncthreads();

  // Pass 1: scores.
  const int part = lane % kL, sub = lane / kL;
  float qr[kG][kE];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g < ng) {
      LoadPart<T, kE>(q + (q_row * layout.num_heads + h0 + g) * D, part * kE, D, qr[g]);
    } else {
#pragma unroll
      for (int i = 0; i < kE; ++i) qr[g][i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kE; ++i) qr[g][i] *= layout.scale;
  }
  float lmax[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) lmax[g] = -INFINITY;
  constexpr int kStride = kWarps * kTokensPerWarp;
  constexpr int kU = kKUnroll<C>;
  for (int base = warp * kTokensPerWarp; base < n; base += kU * kStride) {
    float kr[kU][kE];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int t = base + u * kStride + sub;
      const bool ok = t < n;
      LoadPart<C, kE>(k_cache + (ok ? int64_t{slots[t]} : 0) * kv_width + head_off, part * kE,
                      ok ? D : 0, kr[u]);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int t = base + u * kStride + sub;
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < kE; ++i) a += qr[g][i] * kr[u][i];
#pragma unroll
        for (int off = 1; off < kL; off <<= 1) a += __shfl_xor_sync(0xffffffffu, a, off);
        if (g < ng && t < n) {
          lmax[g] = fmaxf(lmax[g], a);
          if (part == 0) scores[g * split_len + t] = a;
        }
      }
    }
  }
  __syncthreads();
  // Pass 2: softmax of the slice, per head.
  float m[kG], l[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    if (g < ng) {
      m[g] = detail::BlockMax(lmax[g], red);
      float sum = 0.0f;
      for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const float p = expf(scores[g * split_len + t] - m[g]);
        scores[g * split_len + t] = p;
        sum += p;
      }
      l[g] = detail::BlockSum(sum, red);
    }
  }
  __syncthreads();
  // Pass 3: values. A token's row is spread over kLanesV lanes of kDplV elements (16 bytes
  // each where the head is wide enough), so a warp reads kTps rows per step.
  constexpr int kDplV = kDpl * int{sizeof(C)} >= 16 ? kDpl : 16 / int{sizeof(C)};
  constexpr int kTps = kDplV / kDpl;  // tokens per warp step
  constexpr int kLanesV = 32 / kTps;
  const int vs = lane / kLanesV, vpart = lane % kLanesV;
  float acc[kG][kDplV];
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int i = 0; i < kDplV; ++i) acc[g][i] = 0.0f;
  constexpr int kVStride = kWarps * kTps;
  for (int base = warp * kTps; base < n; base += kVStride * kVUnroll<C>) {
    float v[kVUnroll<C>][kDplV];
#pragma unroll
    for (int u = 0; u < kVUnroll<C>; ++u) {
      const int t = base + u * kVStride + vs;
      const bool ok = t < n;
      LoadPart<C, kDplV>(v_cache + (ok ? int64_t{slots[t]} : 0) * kv_width + head_off,
                         vpart * kDplV, ok ? D : 0, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kVUnroll<C>; ++u) {
      const int t = base + u * kVStride + vs;
      if (t < n) {
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          if (g < ng) {
            const float p = scores[g * split_len + t];
#pragma unroll
            for (int i = 0; i < kDplV; ++i) acc[g][i] += p * v[u][i];
          }
        }
      }
    }
  }
  // Sum the kTps token lanes of the same elements, then the warps in shared memory.
#pragma unroll
  for (int off = kLanesV; off < 32; off <<= 1)
#pragma unroll
    for (int g = 0; g < kG; ++g)
#pragma unroll
      for (int i = 0; i < kDplV; ++i) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], off);
  if (vs == 0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) break;
#pragma unroll
      for (int i = 0; i < kDplV; ++i) {
        const int d = vpart * kDplV + i;
        if (d < D) merge[(warp * kG + g) * D + d] = acc[g][i];
      }
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < ng * D; idx += blockDim.x) {
    const int g = idx / D, d = idx % D;
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += merge[(w * kG + g) * D + d];
    float mg = m[0], lg = l[0];
#pragma unroll
    for (int gg = 1; gg < kG; ++gg) {
      if (gg == g) {
        mg = m[gg];
        lg = l[gg];
      }
    }
    const int h = h0 + g;
    if (splits == 1) {
      out[(q_row * layout.num_heads + h) * D + d] = FromFloat<T>(o / lg);
    } else {
      float* p = partial + ((i_row * layout.num_heads + h) * splits + blockIdx.z) * (D + 2);
      if (d == 0) {
        p[0] = n > 0 ? mg : -INFINITY;
        p[1] = lg;
      }
      p[2 + d] = o;
    }
  }
}

template <typename T>
__global__ void CombineKernel(const float* __restrict__ partial, DecodeRows rows,
                              PagedKvLayout layout, int splits, T* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int64_t i_row = blockIdx.x;
  const int h = blockIdx.y;
  const int D = layout.head_dim;
  const int64_t q_row = rows.row_ids != nullptr ? rows.row_ids[i_row] : i_row;
  const float* p = partial + (i_row * layout.num_heads + h) * splits * (D + 2);
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, p[s * (D + 2)]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float sum = 0.0f, o = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float sm = p[s * (D + 2)];
      const float f = sm == -INFINITY ? 0.0f : expf(sm - mx);
      sum += p[s * (D + 2) + 1] * f;
      o += p[s * (D + 2) + 2 + d] * f;
    }
    out[(q_row * layout.num_heads + h) * D + d] = FromFloat<T>(o / sum);
  }
}

// Elements per lane in the score pass of an fp32 cache (8 lanes per row) for head_dim D (0 when
// unsupported); 8 times it is the widest head of the kernel that serves D.
int ElementsPerLane(int D) {
  if (D <= 0 || D > 256 || D % 8 != 0) return 0;
  if (D <= 16) return 2;
  if (D <= 32) return 4;
  if (D <= 64) return 8;
  if (D <= 128) return 16;
  return 32;
}

int GroupChunks(const PagedKvLayout& layout) {
  const int group = layout.num_heads / layout.num_kv_heads;
  const int e = std::max(2, ElementsPerLane(layout.head_dim));
  const int per_block = e >= 32 ? 2 : (e >= 16 ? 4 : 8);
  return (group + per_block - 1) / per_block;
}

// The kernel for heads up to kD wide (16..256).
template <typename T, typename C, int kD>
cudaError_t Launch(const T* q, const DecodeRows& rows, const C* k_cache, const C* v_cache,
                   const PagedKvLayout& layout, const DecodeSplit& plan, float* workspace, T* out,
                   cudaStream_t stream) {
  constexpr int kE = kD / kLanesPerToken<C>;
  constexpr int kG = kGroup<kD>;
  const int chunks = GroupChunks(layout);
  // (KV head chunk, row, split); rows in y, at most 65535 (checked by the caller).
  const dim3 grid(layout.num_kv_heads * chunks, static_cast<unsigned>(rows.rows), plan.splits);
  const size_t smem =
      (size_t{kG} * plan.split_len + size_t{kWarps} * kG * layout.head_dim) * sizeof(float) +
      size_t{static_cast<size_t>(plan.split_len)} * sizeof(int32_t);
  return detail::LaunchDependent(DecodeKernel<T, C, kE>, grid, kWarps * 32, smem, stream, q, rows,
                                 k_cache, v_cache, layout, chunks, plan.splits, plan.split_len,
                                 workspace, out);
}

// With several splits: the pass that merges them into out.
template <typename T>
Status Combine(const DecodeRows& rows, const PagedKvLayout& layout, const DecodeSplit& plan,
               float* workspace, T* out, cudaStream_t stream) {
  if (plan.splits <= 1) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(rows.rows), layout.num_heads);
  SPARK_CUDA_RETURN_IF_ERROR(
      detail::LaunchDependent(CombineKernel<T>, grid, std::min(256, (layout.head_dim + 31) / 32 * 32),
                              0, stream, workspace, rows, layout, plan.splits, out));
  return Status::Ok();
}

}  // namespace

// Enough splits to give every SM a few blocks (none when the grid fills every SM already), at
// least kMinSplitLen tokens each (kMinSplitLenCudaCores off tensor cores), and never more than
// kMaxSplitLen tokens per split (the scores live in shared memory).
DecodeSplit PlanDecodeSplit(const DecodeRows& rows, const PagedKvLayout& layout, int sm_count,
                            bool bf16_cache) {
  DecodeSplit plan;
  const int64_t blocks = rows.rows * layout.num_kv_heads * GroupChunks(layout);
  const int max_len = std::max(1, rows.max_kv_len);
  const int64_t fewest = (max_len + kMaxSplitLen - 1) / kMaxSplitLen;
  const bool tensor_cores =
      bf16_cache && layout.bf16_tensor_cores && detail::DecodeMmaShapeSupported(layout);
  const int min_len = tensor_cores ? kMinSplitLen : kMinSplitLenCudaCores;
  const int64_t most = std::max<int64_t>(fewest, (max_len + min_len - 1) / min_len);
  // A grid that already fills every SM gets no split beyond what the context needs: the
  // combine pass would cost more than the parallelism it buys.
  plan.full_grid = blocks >= sm_count;
  const int64_t want =
      plan.full_grid ? 1 : (4 * int64_t{sm_count} + blocks - 1) / std::max<int64_t>(1, blocks);
  plan.splits = static_cast<int>(std::clamp<int64_t>(want, fewest, most));
  plan.split_len = (max_len + plan.splits - 1) / plan.splits;
  plan.workspace_floats = plan.splits == 1 ? 0
                                           : static_cast<size_t>(rows.rows) * layout.num_heads *
                                                 plan.splits * (layout.head_dim + 2);
  return plan;
}

template <typename T, typename C>
Status PagedDecodeAttention(const T* q, const DecodeRows& rows, const C* k_cache, const C* v_cache,
                            const PagedKvLayout& layout, const DecodeSplit& plan, float* workspace,
                            T* out, cudaStream_t stream) {
  if (rows.rows <= 0) return Status::Ok();
  if (rows.rows > 65535) {
    return InvalidArgumentError("paged decode attention: " + std::to_string(rows.rows) +
                                " rows in one call (at most 65535)");
  }
  const int D = layout.head_dim;
  if constexpr (sizeof(C) == 2) {
    if (layout.bf16_tensor_cores &&
        detail::DecodeMmaSupports(layout, q, k_cache, v_cache, out)) {
      SPARK_RETURN_IF_ERROR(detail::PagedDecodeAttentionMma(q, rows, k_cache, v_cache, layout,
                                                            plan, workspace, out, stream));
      return Combine(rows, layout, plan, workspace, out, stream);
    }
  }
  cudaError_t err = cudaSuccess;
  switch (8 * ElementsPerLane(D)) {
    case 16:
      err = Launch<T, C, 16>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
      break;
    case 32:
      err = Launch<T, C, 32>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
      break;
    case 64:
      err = Launch<T, C, 64>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
      break;
    case 128:
      err = Launch<T, C, 128>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
      break;
    case 256:
      err = Launch<T, C, 256>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
      break;
    default:
      return InvalidArgumentError("paged decode attention: head_dim " + std::to_string(D) +
                                  " is not supported (a multiple of 8, at most 256)");
  }
  SPARK_CUDA_RETURN_IF_ERROR(err);
  return Combine(rows, layout, plan, workspace, out, stream);
}

template Status PagedDecodeAttention(const float*, const DecodeRows&, const float*, const float*,
                                     const PagedKvLayout&, const DecodeSplit&, float*, float*,
                                     cudaStream_t);
template Status PagedDecodeAttention(const __nv_bfloat16*, const DecodeRows&, const __nv_bfloat16*,
                                     const __nv_bfloat16*, const PagedKvLayout&, const DecodeSplit&,
                                     float*, __nv_bfloat16*, cudaStream_t);
template Status PagedDecodeAttention(const float*, const DecodeRows&, const __nv_bfloat16*,
                                     const __nv_bfloat16*, const PagedKvLayout&, const DecodeSplit&,
                                     float*, float*, cudaStream_t);

}  // namespace spark::kernels
