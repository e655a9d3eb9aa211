// Paged prefill attention on bf16 tensor cores, flash-attention-2 style. A block of 4 warps takes
// one tile of up to 128 query rows of one sequence and one query head; warp w owns two 16-row
// groups, rows 16w..16w+15 and 64+16w..64+16w+15 (interleaved, so causal work is even across
// warps). Per KV tile of 64 tokens (gathered from the paged cache into shared memory as bf16,
// rows padded so ldmatrix is free of bank conflicts):
//   S = Q K^T with mma.sync: each K fragment loaded from shared memory feeds both row groups, and
//     the Q fragments of one 16-column step are loaded once for all 64 tokens;
//   causal mask and online softmax in fp32 on the accumulators (base-2 exponent, scale folded);
//   O += P V with P taken straight from the S accumulators as bf16 A fragments, each V fragment
//     again feeding both row groups.
// Two pipelines: with kStages == 2 (double-buffered K and V, ~102 KB of shared memory for
// head_dim 128) the next tile's K and V load during the whole of this tile's math; with
// kStages == 1 (~68 KB, for GPUs with less shared memory per block such as GB10) V of tile t
// loads during S of tile t and K of tile t+1 during P V of tile t. bf16 caches copy with
// cp.async, fp32 caches (and fp32 queries) are rounded to bf16 on the way in. Warps whose rows
// see none of a KV tile skip its math; tiles run last-first so the long causal rows start early.
#include <atomic>
#include <cmath>

#include "kernels/attention_prefill_mma.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/launch_settings.h"
#include "kernels/mma.cuh"

namespace spark::kernels::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kGroups = kPrefillTileRows / (16 * kWarps);  // 16-row groups per warp
static_assert(kGroups * 16 * kWarps == kPrefillTileRows, "tile rows split into 16-row groups");
constexpr int kKvTile = 64;
constexpr int kPad = 8;  // bf16 per shared row: 16 bytes, so 8 ldmatrix rows hit 8 bank groups

template <int D, int kStages>
constexpr size_t SharedBytes() {
  return size_t{kPrefillTileRows + 2 * kStages * kKvTile} * (D + kPad) * sizeof(__nv_bfloat16);
}

__device__ __forceinline__ void Store2(float* dst, float a, float b) {
  *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}

__device__ __forceinline__ void Store2(__nv_bfloat16* dst, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(a, b);
}

template <typename T, typename C, int D, int kStages>
__global__ void __launch_bounds__(kWarps * 32, 2)
    PrefillMmaKernel(const T* __restrict__ q, const PrefillTile* __restrict__ tiles, int num_tiles,
                     const int32_t* __restrict__ block_tables, const C* __restrict__ k_cache,
                     const C* __restrict__ v_cache, PagedKvLayout layout, T* __restrict__ out) {
  constexpr int kStride = D + kPad;
  constexpr int kChunks = D / 8;  // 16-byte bf16 chunks per row
  constexpr int kThreads = kWarps * 32;
  static_assert(kThreads % kChunks == 0, "a thread stages one column chunk of several rows");
  constexpr int kRowStep = kThreads / kChunks;
  constexpr int kTileElems = kKvTile * kStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kPrefillTileRows][kStride]
  __nv_bfloat16* ks = qs + kPrefillTileRows * kStride;    // [kStages][kKvTile][kStride]
  __nv_bfloat16* vs = ks + kStages * kTileElems;          // [kStages][kKvTile][kStride]

  const PrefillTile tile = tiles[num_tiles - 1 - blockIdx.y];
  const int h = blockIdx.x;
  const int kvh = h / (layout.num_heads / layout.num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_stride = int64_t{layout.num_heads} * D;
  const int64_t kv_width = int64_t{layout.num_kv_heads} * D;
  const SlotFinder slot_of(block_tables + tile.table_offset, layout.block_size);
  const int chunk_col = (threadIdx.x % kChunks) * 8;
  const int chunk_row = threadIdx.x / kChunks;

  for (int r = chunk_row; r < kPrefillTileRows; r += kRowStep) {
    const bool valid = r < tile.rows;
    const int64_t at = valid ? (tile.row_begin + r) * q_stride + int64_t{h} * D + chunk_col : 0;
    StageBf16x8(qs + r * kStride + chunk_col, q + at, valid);
  }
  const int kv_end = tile.kv_len0 + tile.rows - 1;  // tokens the tile's last row sees
  // This thread's chunks of KV tile rows into kdst and/or vdst (nullptr: not that one); K and V
  // staged together share the block-table lookups.
  auto stage = [&](__nv_bfloat16* kdst, __nv_bfloat16* vdst, int t0) {
#pragma unroll
    for (int j = chunk_row; j < kKvTile; j += kRowStep) {
      const int tok = t0 + j;
      const bool valid = tok < kv_end;
      const int64_t at = (valid ? slot_of(tok) * kv_width + int64_t{kvh} * D : 0) + chunk_col;
      if (kdst != nullptr) StageBf16x8(kdst + j * kStride + chunk_col, k_cache + at, valid);
      if (vdst != nullptr) StageBf16x8(vdst + j * kStride + chunk_col, v_cache + at, valid);
    }
  };

  // First tile row of this warp's group g. This thread's accumulator rows are
  // group_row(g) + lane / 4 and 8 below; padding rows behave like the last real row.
  auto group_row = [&](int g) { return g * 16 * kWarps + warp * 16; };
  const int last = tile.rows - 1;
  const int warp_vis_min = tile.kv_len0 + min(group_row(0), last);
  const int warp_vis_max = tile.kv_len0 + min(group_row(kGroups - 1) + 15, last);
  const float scale_log2 = layout.scale * 1.4426950408889634f;

  float o[kGroups][D / 8][4];
  float m_a[kGroups], m_b[kGroups], l_a[kGroups], l_b[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[g][i][0] = o[g][i][1] = o[g][i][2] = o[g][i][3] = 0.0f;
    m_a[g] = m_b[g] = -INFINITY;
    l_a[g] = l_b[g] = 0.0f;
  }

  const int num_kv_tiles = (kv_end + kKvTile - 1) / kKvTile;
  stage(ks, kStages == 2 ? vs : nullptr, 0);
  CpAsyncCommit();
  for (int t = 0; t < num_kv_tiles; ++t) {
    const int t0 = t * kKvTile;
    const __nv_bfloat16* kt = ks + (kStages == 2 ? (t % 2) * kTileElems : 0);
    const __nv_bfloat16* vt = vs + (kStages == 2 ? (t % 2) * kTileElems : 0);
    // Tile t's K (and Q; with two stages V too) in place; every warp is done with the buffers
    // refilled next: tile t-1's (two stages) or V of tile t-1 (one stage).
    CpAsyncWaitAll();
    __syncthreads();
    if constexpr (kStages == 2) {
      if (t + 1 < num_kv_tiles) {
        const int next = ((t + 1) % 2) * kTileElems;
        stage(ks + next, vs + next, t0 + kKvTile);
        CpAsyncCommit();
      }
    } else {
      stage(nullptr, vs, t0);
      CpAsyncCommit();
    }
    const bool active = t0 < warp_vis_max;
    float s[kGroups][kKvTile / 8][4];
    if (active) {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
#pragma unroll
        for (int nb = 0; nb < kKvTile / 8; ++nb) {
          s[g][nb][0] = s[g][nb][1] = s[g][nb][2] = s[g][nb][3] = 0.0f;
        }
      }
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t qf[kGroups][4];
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int r = group_row(g) + lane % 8 + ((lane / 8) % 2) * 8;
          LdMatrixX4(qf[g], SharedAddress(qs + r * kStride + kc * 16 + (lane / 16) * 8));
        }
#pragma unroll
        for (int np = 0; np < kKvTile / 16; ++np) {
          uint32_t b[4];
          const int j = np * 16 + lane % 8 + (lane / 16) * 8;
          LdMatrixX4(b, SharedAddress(kt + j * kStride + kc * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            MmaBf16(s[g][2 * np], qf[g], b[0], b[1]);
            MmaBf16(s[g][2 * np + 1], qf[g], b[2], b[3]);
          }
        }
      }
      if (t0 + kKvTile > warp_vis_min) {  // some row of this warp stops inside the tile
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int vis_a = tile.kv_len0 + min(group_row(g) + lane / 4, last);
          const int vis_b = tile.kv_len0 + min(group_row(g) + lane / 4 + 8, last);
#pragma unroll
          for (int nb = 0; nb < kKvTile / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int tok = t0 + nb * 8 + (lane % 4) * 2 + e;
              if (tok >= vis_a) s[g][nb][e] = -INFINITY;
              if (tok >= vis_b) s[g][nb][2 + e] = -INFINITY;
            }
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        float corr_a, corr_b;
        OnlineSoftmaxStep(s[g], scale_log2, m_a[g], m_b[g], l_a[g], l_b[g], corr_a, corr_b);
        // Past the first tiles a row's maximum rarely grows: skip the multiply by 1.
        if (__any_sync(0xffffffffu, corr_a != 1.0f || corr_b != 1.0f)) {
#pragma unroll
          for (int i = 0; i < D / 8; ++i) {
            o[g][i][0] *= corr_a;
            o[g][i][1] *= corr_a;
            o[g][i][2] *= corr_b;
            o[g][i][3] *= corr_b;
          }
        }
      }
    }
    if constexpr (kStages == 1) {
      CpAsyncWaitAll();
      __syncthreads();  // V of tile t in place; every warp is done with K of tile t
      if (t + 1 < num_kv_tiles) {
        stage(ks, nullptr, t0 + kKvTile);
        CpAsyncCommit();
      }
    }  // (two stages: tile t's V landed with its K; tile t+1's copies stay in flight)
    if (active) {
#pragma unroll
      for (int kc = 0; kc < kKvTile / 16; ++kc) {
        uint32_t p[kGroups][4];
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          p[g][0] = PackBf16(s[g][2 * kc][0], s[g][2 * kc][1]);
          p[g][1] = PackBf16(s[g][2 * kc][2], s[g][2 * kc][3]);
          p[g][2] = PackBf16(s[g][2 * kc + 1][0], s[g][2 * kc + 1][1]);
          p[g][3] = PackBf16(s[g][2 * kc + 1][2], s[g][2 * kc + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          const int j = kc * 16 + lane % 8 + ((lane / 8) % 2) * 8;
          LdMatrixX4Trans(b, SharedAddress(vt + j * kStride + dp * 16 + (lane / 16) * 8));
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            MmaBf16(o[g][2 * dp], p[g], b[0], b[1]);
            MmaBf16(o[g][2 * dp + 1], p[g], b[2], b[3]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int ra = group_row(g) + lane / 4, rb = ra + 8;
    const float inv_a = 1.0f / QuadSum(l_a[g]), inv_b = 1.0f / QuadSum(l_b[g]);
    T* out_a = out + (tile.row_begin + ra) * q_stride + int64_t{h} * D + (lane % 4) * 2;
    T* out_b = out_a + 8 * q_stride;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      if (ra < tile.rows) Store2(out_a + i * 8, o[g][i][0] * inv_a, o[g][i][1] * inv_a);
      if (rb < tile.rows) Store2(out_b + i * 8, o[g][i][2] * inv_b, o[g][i][3] * inv_b);
    }
  }
}

// Double buffering when the device gives a block enough shared memory (H100/H200: yes; GB10:
// no). LaunchSettings::prefill_stages forces one, for comparisons and tests.
template <int D>
int PickStages() {
  const int forced = GetLaunchSettings().prefill_stages;
  if (forced == 1 || forced == 2) return forced;
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return 1;
  }
  return size_t(optin) >= SharedBytes<D, 2>() ? 2 : 1;
}

template <typename T, typename C, int D, int kStages>
Status Launch(const T* q, const PrefillTile* tiles, int num_tiles, const int32_t* block_tables,
              const C* k_cache, const C* v_cache, const PagedKvLayout& layout, T* out,
              cudaStream_t stream) {
  constexpr size_t kSmem = SharedBytes<D, kStages>();
  static std::atomic<uint64_t> configured{0};
  SPARK_RETURN_IF_ERROR(AllowSharedMemory(PrefillMmaKernel<T, C, D, kStages>, kSmem, configured));
  if (num_tiles > 65535) {
    return InvalidArgumentError("paged prefill attention: " + std::to_string(num_tiles) +
                                " tiles in one call (at most 65535)");
  }
  const dim3 grid(layout.num_heads, num_tiles);
  PrefillMmaKernel<T, C, D, kStages><<<grid, kWarps * 32, kSmem, stream>>>(
      q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template <typename T, typename C, int D>
Status LaunchFor(const T* q, const PrefillTile* tiles, int num_tiles, const int32_t* block_tables,
                 const C* k_cache, const C* v_cache, const PagedKvLayout& layout, T* out,
                 cudaStream_t stream) {
  if (PickStages<D>() == 2) {
    return Launch<T, C, D, 2>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                              stream);
  }
  return Launch<T, C, D, 1>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                            stream);
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
    return LaunchFor<T, C, 64>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                               stream);
  }
  if (layout.head_dim == 128) {
    return LaunchFor<T, C, 128>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
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
