// Paged prefill attention on bf16 tensor cores, flash-attention style. A block of 4 warps takes
// one tile of up to 64 query rows of one sequence and one query head; warp w owns rows
// 16w..16w+15. Per KV tile of 64 tokens (gathered from the paged cache into shared memory as
// bf16, padded rows so ldmatrix is free of bank conflicts):
//   S = Q K^T with mma.sync (Q fragments stay in registers for the whole tile loop),
//   causal mask and online softmax in fp32 on the accumulators (base-2 exponent, scale folded),
//   O += P V with P taken straight from the S accumulators as bf16 A fragments.
// V of tile t loads while S of tile t is computed, K of tile t+1 while P V of tile t is; bf16
// caches copy with cp.async, fp32 caches (the engine's) are rounded to bf16 on the way in.
// Warps whose rows see none of a KV tile skip its math; tiles run last-first so the long
// causal rows start early.
#include <atomic>
#include <cmath>

#include "kernels/attention_prefill_mma.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"

namespace spark::kernels::detail {
namespace {

constexpr int kWarps = kPrefillTileRows / 16;
constexpr int kKvTile = 64;
constexpr int kPad = 8;  // bf16 per shared row: 16 bytes, so 8 ldmatrix rows hit 8 bank groups

template <int D>
constexpr size_t SharedBytes() {
  return size_t{kPrefillTileRows + 2 * kKvTile} * (D + kPad) * sizeof(__nv_bfloat16);
}

__device__ __forceinline__ void Store2(float* dst, float a, float b) {
  *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}

__device__ __forceinline__ void Store2(__nv_bfloat16* dst, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(a, b);
}

template <typename T, typename C, int D>
__global__ void __launch_bounds__(kWarps * 32)
    PrefillMmaKernel(const T* __restrict__ q, const PrefillTile* __restrict__ tiles, int num_tiles,
                     const int32_t* __restrict__ block_tables, const C* __restrict__ k_cache,
                     const C* __restrict__ v_cache, PagedKvLayout layout, T* __restrict__ out) {
  constexpr int kStride = D + kPad;
  constexpr int kChunks = D / 8;  // 16-byte bf16 chunks per row
  constexpr int kThreads = kWarps * 32;
  static_assert(kThreads % kChunks == 0, "a thread stages one column chunk of several rows");
  constexpr int kRowStep = kThreads / kChunks;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kPrefillTileRows][kStride]
  __nv_bfloat16* ks = qs + kPrefillTileRows * kStride;    // [kKvTile][kStride]
  __nv_bfloat16* vs = ks + kKvTile * kStride;             // [kKvTile][kStride]

  const PrefillTile tile = tiles[num_tiles - 1 - blockIdx.y];
  const int h = blockIdx.x;
  const int kvh = h / (layout.num_heads / layout.num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_stride = int64_t{layout.num_heads} * D;
  const int64_t kv_width = int64_t{layout.num_kv_heads} * D;
  const int32_t* table = block_tables + tile.table_offset;
  const int bs = layout.block_size;
  const int chunk_col = (threadIdx.x % kChunks) * 8;
  const int chunk_row = threadIdx.x / kChunks;

  for (int r = chunk_row; r < kPrefillTileRows; r += kRowStep) {
    const bool valid = r < tile.rows;
    const int64_t at = valid ? (tile.row_begin + r) * q_stride + int64_t{h} * D + chunk_col : 0;
    StageBf16x8(qs + r * kStride + chunk_col, q + at, valid);
  }
  const int kv_end = tile.kv_len0 + tile.rows - 1;  // tokens the tile's last row sees
  auto stage_kv = [&](__nv_bfloat16* dst, const C* cache, int t0) {
    for (int j = chunk_row; j < kKvTile; j += kRowStep) {
      const int tok = t0 + j;
      const bool valid = tok < kv_end;
      const int64_t at = valid ? CacheSlot(table, tok, bs) * kv_width + int64_t{kvh} * D : 0;
      StageBf16x8(dst + j * kStride + chunk_col, cache + at + chunk_col, valid);
    }
    CpAsyncCommit();
  };
  stage_kv(ks, k_cache, 0);

  // This thread's accumulator rows (tile rows); padding rows behave like the last real row.
  const int row_a = warp * 16 + lane / 4, row_b = row_a + 8;
  const int last = tile.rows - 1;
  const int vis_a = tile.kv_len0 + min(row_a, last), vis_b = tile.kv_len0 + min(row_b, last);
  const int warp_vis_min = tile.kv_len0 + min(warp * 16, last);
  const int warp_vis_max = tile.kv_len0 + min(warp * 16 + 15, last);
  const float scale_log2 = layout.scale * 1.4426950408889634f;

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

  const int num_kv_tiles = (kv_end + kKvTile - 1) / kKvTile;
  for (int t = 0; t < num_kv_tiles; ++t) {
    const int t0 = t * kKvTile;
    CpAsyncWaitAll();
    __syncthreads();  // K of tile t (and Q) in place; every warp is done with V of tile t-1
    if (t == 0) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        const int r = warp * 16 + lane % 8 + ((lane / 8) % 2) * 8;
        LdMatrixX4(qf[kc], SharedAddress(qs + r * kStride + kc * 16 + (lane / 16) * 8));
      }
    }
    stage_kv(vs, v_cache, t0);
    const bool active = t0 < warp_vis_max;
    float s[kKvTile / 8][4];
    if (active) {
#pragma unroll
      for (int nb = 0; nb < kKvTile / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
#pragma unroll
        for (int np = 0; np < kKvTile / 16; ++np) {
          uint32_t b[4];
          const int j = np * 16 + lane % 8 + (lane / 16) * 8;
          LdMatrixX4(b, SharedAddress(ks + j * kStride + kc * 16 + ((lane / 8) % 2) * 8));
          MmaBf16(s[2 * np], qf[kc], b[0], b[1]);
          MmaBf16(s[2 * np + 1], qf[kc], b[2], b[3]);
        }
      }
      if (t0 + kKvTile > warp_vis_min) {  // some row of this warp stops inside the tile
#pragma unroll
        for (int nb = 0; nb < kKvTile / 8; ++nb) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int tok = t0 + nb * 8 + (lane % 4) * 2 + e;
            if (tok >= vis_a) s[nb][e] = -INFINITY;
            if (tok >= vis_b) s[nb][2 + e] = -INFINITY;
          }
        }
      }
      float corr_a, corr_b;
      OnlineSoftmaxStep(s, scale_log2, m_a, m_b, l_a, l_b, corr_a, corr_b);
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[i][0] *= corr_a;
        o[i][1] *= corr_a;
        o[i][2] *= corr_b;
        o[i][3] *= corr_b;
      }
    }
    CpAsyncWaitAll();
    __syncthreads();  // V of tile t in place; every warp is done with K of tile t
    if (t + 1 < num_kv_tiles) stage_kv(ks, k_cache, t0 + kKvTile);
    if (active) {
#pragma unroll
      for (int kc = 0; kc < kKvTile / 16; ++kc) {
        const uint32_t p[4] = {PackBf16(s[2 * kc][0], s[2 * kc][1]),
                               PackBf16(s[2 * kc][2], s[2 * kc][3]),
                               PackBf16(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                               PackBf16(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          const int j = kc * 16 + lane % 8 + ((lane / 8) % 2) * 8;
          LdMatrixX4Trans(b, SharedAddress(vs + j * kStride + dp * 16 + (lane / 16) * 8));
          MmaBf16(o[2 * dp], p, b[0], b[1]);
          MmaBf16(o[2 * dp + 1], p, b[2], b[3]);
        }
      }
    }
  }
  const float inv_a = 1.0f / QuadSum(l_a), inv_b = 1.0f / QuadSum(l_b);
  T* out_a = out + (tile.row_begin + row_a) * q_stride + int64_t{h} * D + (lane % 4) * 2;
  T* out_b = out_a + 8 * q_stride;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    if (row_a < tile.rows) Store2(out_a + i * 8, o[i][0] * inv_a, o[i][1] * inv_a);
    if (row_b < tile.rows) Store2(out_b + i * 8, o[i][2] * inv_b, o[i][3] * inv_b);
  }
}

template <typename T, typename C, int D>
Status Launch(const T* q, const PrefillTile* tiles, int num_tiles, const int32_t* block_tables,
              const C* k_cache, const C* v_cache, const PagedKvLayout& layout, T* out,
              cudaStream_t stream) {
  constexpr size_t kSmem = SharedBytes<D>();
  static std::atomic<uint64_t> configured{0};
  SPARK_RETURN_IF_ERROR(AllowSharedMemory(PrefillMmaKernel<T, C, D>, kSmem, configured));
  if (num_tiles > 65535) {
    return InvalidArgumentError("paged prefill attention: " + std::to_string(num_tiles) +
                                " tiles in one call (at most 65535)");
  }
  const dim3 grid(layout.num_heads, num_tiles);
  PrefillMmaKernel<T, C, D><<<grid, kWarps * 32, kSmem, stream>>>(q, tiles, num_tiles, block_tables,
                                                                  k_cache, v_cache, layout, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

bool PrefillMmaSupports(const PagedKvLayout& layout, const void* q, const void* k_cache,
                        const void* v_cache, const void* out) {
  return (layout.head_dim == 64 || layout.head_dim == 128) && Aligned16(q) && Aligned16(k_cache) &&
         Aligned16(v_cache) && Aligned16(out);
}

template <typename T, typename C>
Status PagedPrefillAttentionMma(const T* q, const PrefillTile* tiles, int num_tiles,
                                const int32_t* block_tables, const C* k_cache, const C* v_cache,
                                const PagedKvLayout& layout, T* out, cudaStream_t stream) {
  if (layout.head_dim == 64) {
    return Launch<T, C, 64>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                            stream);
  }
  if (layout.head_dim == 128) {
    return Launch<T, C, 128>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                             stream);
  }
  return InvalidArgumentError("tensor-core prefill attention: head_dim " +
                              std::to_string(layout.head_dim) + " is not supported (64 or 128)");
}

template Status PagedPrefillAttentionMma(const float*, const PrefillTile*, int, const int32_t*,
                                         const float*, const float*, const PagedKvLayout&, float*,
                                         cudaStream_t);
template Status PagedPrefillAttentionMma(const __nv_bfloat16*, const PrefillTile*, int,
                                         const int32_t*, const __nv_bfloat16*, const __nv_bfloat16*,
                                         const PagedKvLayout&, __nv_bfloat16*, cudaStream_t);
template Status PagedPrefillAttentionMma(const float*, const PrefillTile*, int, const int32_t*,
                                         const __nv_bfloat16*, const __nv_bfloat16*,
                                         const PagedKvLayout&, float*, cudaStream_t);

}  // namespace spark::kernels::detail
