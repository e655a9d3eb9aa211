// Paged prefill attention, flash-style on CUDA cores (the exact fp32 path; the bf16 tensor-core
// kernel is attention_prefill_mma.cu): a block (4 warps) takes 16 query rows of a tile (a tile
// of kPrefillTileRows rows spans several blocks) and one query head. KV tiles of 32 tokens are
// gathered from the paged cache into shared memory (keys padded by one float per row so the
// per-lane dot products hit distinct banks); each warp owns 4 query rows, lane j scores token j
// of the tile, and the softmax is online over tiles, causal per row. A lane accumulates
// elements lane + 32 i.
#include <algorithm>
#include <atomic>

#include "kernels/attention.h"
#include "kernels/attention_prefill_mma.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

using detail::FromFloat;
using detail::ToFloat;

constexpr int kWarps = 4;
constexpr int kBlockRows = 16;  // query rows per block
constexpr int kRowsPerWarp = kBlockRows / kWarps;
constexpr int kBlocksPerTile = kPrefillTileRows / kBlockRows;
constexpr int kKvTile = 32;

constexpr size_t SharedBytes(int D) {
  return (size_t{kKvTile} * (D + 1) + size_t{kKvTile} * D + size_t{kBlockRows} * D) *
         sizeof(float);
}

template <typename T, typename C, int kDpl>
__global__ void __launch_bounds__(kWarps * 32)
    PrefillKernel(const T* __restrict__ q, const PrefillTile* __restrict__ tiles,
                  const int32_t* __restrict__ block_tables, const C* __restrict__ k_cache,
                  const C* __restrict__ v_cache, PagedKvLayout layout, T* __restrict__ out) {
  extern __shared__ float smem[];
  const int D = layout.head_dim;
  float* ks = smem;                    // [kKvTile][D + 1]
  float* vs = ks + kKvTile * (D + 1);  // [kKvTile][D]
  float* qs = vs + kKvTile * D;        // [kBlockRows][D]
  PrefillTile tile = tiles[blockIdx.x / kBlocksPerTile];
  const int part = (blockIdx.x % kBlocksPerTile) * kBlockRows;
  if (part >= tile.rows) return;
  tile.row_begin += part;
  tile.kv_len0 += part;
  tile.rows = min(kBlockRows, tile.rows - part);
  const int h = blockIdx.y;
  const int kvh = h / (layout.num_heads / layout.num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t kv_width = int64_t{layout.num_kv_heads} * D;
  const int32_t* table = block_tables + tile.table_offset;
  const int bs = layout.block_size;

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    qs[idx] = r < tile.rows
                  ? ToFloat(q[((tile.row_begin + r) * int64_t{layout.num_heads} + h) * D + d]) *
                        layout.scale
                  : 0.0f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDpl];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) acc[rr][i] = 0.0f;
  }
  const int kv_end = tile.kv_len0 + tile.rows - 1;  // tokens the tile's last row sees
  for (int t0 = 0; t0 < kv_end; t0 += kKvTile) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kKvTile * D; idx += blockDim.x) {
      const int j = idx / D, d = idx % D;
      const int tok = t0 + j;
      float kv = 0.0f, vv = 0.0f;
      if (tok < kv_end) {
        const int64_t slot = detail::CacheSlot(table, tok, bs);
        kv = ToFloat(k_cache[slot * kv_width + int64_t{kvh} * D + d]);
        vv = ToFloat(v_cache[slot * kv_width + int64_t{kvh} * D + d]);
      }
      ks[j * (D + 1) + d] = kv;
      vs[j * D + d] = vv;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      if (r >= tile.rows) break;
      const int visible = tile.kv_len0 + r;
      if (t0 >= visible) continue;
      const int tok = t0 + lane;
      float s = -INFINITY;
      if (tok < visible) {
        const float* qr = qs + r * D;
        const float* kr = ks + lane * (D + 1);
        float a = 0.0f;
        for (int d = 0; d < D; ++d) a += qr[d] * kr[d];
        s = a;
      }
      const float m_new = fmaxf(m[rr], detail::WarpMax(s));
      const float corr = expf(m[rr] - m_new);
      const float p = tok < visible ? expf(s - m_new) : 0.0f;
      l[rr] = l[rr] * corr + detail::WarpSum(p);
#pragma unroll
      for (int i = 0; i < kDpl; ++i) acc[rr][i] *= corr;
      for (int j = 0; j < kKvTile; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int i = 0; i < kDpl; ++i) {
          const int d = lane + 32 * i;
          if (d < D) acc[rr][i] += pj * vs[j * D + d];
        }
      }
      m[rr] = m_new;
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= tile.rows) break;
    T* o = out + ((tile.row_begin + r) * int64_t{layout.num_heads} + h) * D;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) {
      const int d = lane + 32 * i;
      if (d < D) o[d] = FromFloat<T>(acc[rr][i] / l[rr]);
    }
  }
}

template <typename T, typename C, int kDpl>
Status Launch(const T* q, const PrefillTile* tiles, int num_tiles, const int32_t* block_tables,
              const C* k_cache, const C* v_cache, const PagedKvLayout& layout, T* out,
              cudaStream_t stream) {
  const size_t smem = SharedBytes(layout.head_dim);
  // Enough for the widest head this instantiation serves (32 * kDpl), set once per device.
  if (constexpr size_t kMost = SharedBytes(32 * kDpl); kMost > 48 * 1024) {
    static std::atomic<uint64_t> configured{0};
    SPARK_RETURN_IF_ERROR(detail::AllowSharedMemory(PrefillKernel<T, C, kDpl>, kMost, configured));
  }
  const dim3 grid(num_tiles * kBlocksPerTile, layout.num_heads);
  PrefillKernel<T, C, kDpl>
      <<<grid, kWarps * 32, smem, stream>>>(q, tiles, block_tables, k_cache, v_cache, layout, out);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

template <typename T, typename C>
Status PagedPrefillAttention(const T* q, const PrefillTile* tiles, int num_tiles,
                             const int32_t* block_tables, const C* k_cache, const C* v_cache,
                             const PagedKvLayout& layout, T* out, cudaStream_t stream) {
  if (num_tiles <= 0) return Status::Ok();
  if (layout.bf16_tensor_cores && detail::PrefillMmaSupports(layout, q, k_cache, v_cache, out)) {
    return detail::PagedPrefillAttentionMma(q, tiles, num_tiles, block_tables, k_cache, v_cache,
                                            layout, out, stream);
  }
  const int D = layout.head_dim;
  if (D <= 32)
    return Launch<T, C, 1>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                           stream);
  if (D <= 64)
    return Launch<T, C, 2>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                           stream);
  if (D <= 128)
    return Launch<T, C, 4>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                           stream);
  if (D <= 256)
    return Launch<T, C, 8>(q, tiles, num_tiles, block_tables, k_cache, v_cache, layout, out,
                           stream);
  return InvalidArgumentError("paged prefill attention: head_dim " + std::to_string(D) +
                              " is not supported (at most 256)");
}

template Status PagedPrefillAttention(const float*, const PrefillTile*, int, const int32_t*,
                                      const float*, const float*, const PagedKvLayout&, float*,
                                      cudaStream_t);
template Status PagedPrefillAttention(const __nv_bfloat16*, const PrefillTile*, int, const int32_t*,
                                      const __nv_bfloat16*, const __nv_bfloat16*,
                                      const PagedKvLayout&, __nv_bfloat16*, cudaStream_t);
template Status PagedPrefillAttention(const float*, const PrefillTile*, int, const int32_t*,
                                      const __nv_bfloat16*, const __nv_bfloat16*,
                                      const PagedKvLayout&, float*, cudaStream_t);

}  // namespace spark::kernels
