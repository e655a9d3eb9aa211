// Paged decode attention on bf16 tensor cores over a bf16 cache. The query heads that share a KV
// head (up to 16; zeros past them) are the rows of one m16n8k16 A tile, so 16 cached tokens cost
// 2 * head_dim / 8 MMAs instead of a multiply-add per element and query head: the CUDA-core
// kernel issues about as many instructions per bf16 token as per fp32 one and cannot stream a
// bf16 cache at memory speed. A block (4 warps) takes one decode row, one KV head and one split
// of the context, which it streams in 64-token tiles through a cp.async pipeline of S stages; warp
// w owns tokens 16w..16w+15 of every tile with its own online softmax (fp32, base 2), and the
// warps merge in shared memory at the end. Q and the probabilities are rounded to bf16 (as in the
// tensor-core prefill kernel). The first S tiles' entries older than the row's newest token
// are copied before the dependent-launch wait, while the kernel before (the step's KV write)
// finishes (faster at batch 1: the notes' "Three pipeline stages in decode attention"). Where
// an SM holds two blocks of three stages (H200) and the rows' blocks fill every SM
// before any split (DecodeSplit::full_grid: a batch of decode rows), the pipeline has three, so
// a context of up to 192 tokens comes in one round trip.
#include <atomic>
#include <cmath>

#include "kernels/attention_decode_mma.h"
#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"

namespace spark::kernels::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kTile = 64;  // tokens per pipeline stage; 16 per warp
constexpr int kRows = 16;  // query heads per A tile
constexpr int kPad = 8;    // bf16 per shared row: 16 bytes, so ldmatrix is free of bank conflicts

constexpr int kMaxSplitLen = 512;  // tokens per block (the split planner's bound)

// The Q tile, S stages of K and V tiles (the warps' merge reuses them) and the split's cache
// slots.
template <int D, int S>
constexpr size_t SharedBytes() {
  return size_t{kRows + 2 * S * kTile} * (D + kPad) * sizeof(__nv_bfloat16) +
         kMaxSplitLen * sizeof(int32_t);
}
template <int D>
constexpr size_t MergeBytes() {
  return size_t{kWarps} * kRows * (D + 2) * sizeof(float);
}

// Waits until at most n (0..2) committed cp.async groups are still in flight.
__device__ __forceinline__ void CpAsyncWaitAtMost(int n) {
  if (n <= 0) {
    CpAsyncWaitGroup<0>();
  } else if (n == 1) {
    CpAsyncWaitGroup<1>();
  } else {
    CpAsyncWaitGroup<2>();
  }
}

template <typename T, int D, int S>
__global__ void __launch_bounds__(kWarps * 32)
    DecodeMmaKernel(const T* __restrict__ q, DecodeRows rows,
                    const __nv_bfloat16* __restrict__ k_cache,
                    const __nv_bfloat16* __restrict__ v_cache, PagedKvLayout layout, int splits,
                    int split_len, float* __restrict__ partial, T* __restrict__ out) {
  constexpr int kStride = D + kPad;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kRowStep = kWarps * 32 / kChunks;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kRows][kStride]
  __nv_bfloat16* stages = qs + kRows * kStride;           // [S][K tile, V tile][kTile][kStride]
  auto* slots = reinterpret_cast<int32_t*>(stages + 2 * S * kTile * kStride);  // [kMaxSplitLen]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = blockIdx.x;
  const int64_t i_row = blockIdx.y;
  const int group = layout.num_heads / layout.num_kv_heads;
  const int h0 = kvh * group;
  const int64_t q_row = rows.row_ids != nullptr ? rows.row_ids[i_row] : i_row;
  const int begin = blockIdx.z * split_len;
  const int n = max(0, min(rows.kv_len[i_row], begin + split_len) - begin);
  const int32_t* table = rows.block_tables + rows.table_offset[i_row];
  const int64_t kv_width = int64_t{layout.num_kv_heads} * D;
  const int bs = layout.block_size;
  const int chunk_col = (threadIdx.x % kChunks) * 8;
  const int chunk_row = threadIdx.x / kChunks;

  // The split's cache slots once (no table lookups or divisions in the staging loop).
  for (int j = threadIdx.x; j < n; j += kWarps * 32) {
    slots[j] = static_cast<int32_t>(CacheSlot(table, begin + j, bs));
  }
  // Copies tile t's rows [from, to) of K and V (rows past n zero-filled).
  auto copy = [&](int t, int from, int to) {
    __nv_bfloat16* ks = stages + (t % S) * 2 * kTile * kStride;
    __nv_bfloat16* vs = ks + kTile * kStride;
    for (int j = from + chunk_row; j < to; j += kRowStep) {
      const int rel = t * kTile + j;
      const bool valid = rel < n;
      const int64_t at = valid ? int64_t{slots[rel]} * kv_width + int64_t{kvh} * D : 0;
      CpAsync16(ks + j * kStride + chunk_col, k_cache + at + chunk_col, valid);
      CpAsync16(vs + j * kStride + chunk_col, v_cache + at + chunk_col, valid);
    }
  };
  auto stage = [&](int t) {
    copy(t, 0, kTile);
    CpAsyncCommit();
  };
  const int tiles = (n + kTile - 1) / kTile;
  __syncthreads();  // slots in place
  // Before the dependent-launch wait, the first S tiles' rows up to the row's newest token:
  // older entries were written by earlier steps, only the newest (and q) by the kernel before.
  const int newest = rows.kv_len[i_row] - 1 - begin;  // within the split (or outside it)
  const int first = min(tiles, S);                    // tiles staged before the loop
  int early[S] = {};
  for (int t = 0; t < first; ++t) {
    early[t] = max(0, min(kTile, newest - t * kTile));
    copy(t, 0, early[t]);
  }
  CpAsyncCommit();
  detail::LetSuccessorLaunchThenWait();
  for (int r = chunk_row; r < kRows; r += kRowStep) {
    const bool valid = r < group;
    StageBf16x8(qs + r * kStride + chunk_col,
                q + (q_row * layout.num_heads + h0 + (valid ? r : 0)) * D + chunk_col, valid);
  }
  // The rest of those tiles, from a multiple of the copy loop's row step below where it stopped.
  for (int t = 0; t < first; ++t) copy(t, early[t] / kRowStep * kRowStep, kTile);
  CpAsyncCommit();
  if (tiles == 0) CpAsyncWaitAll();  // an empty split: only the Q copies were issued

  // Rows of this thread's accumulators: lane / 4 and lane / 4 + 8 (query heads h0 + row).
  const float scale_log2 = layout.scale * 1.4426950408889634f;
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  for (int t = 0; t < tiles; ++t) {
    // Tiles 0..S-1 were staged above; tile t + S - 1 goes into the stage tile t - 1 left. The
    // groups committed after tile t's own: those of iterations max(1, t - S + 2)..t that staged.
    if (t > 0 && t + S - 1 < tiles) stage(t + S - 1);
    CpAsyncWaitAtMost(min(t, tiles - S) - max(1, t - S + 2) + 1);
    __syncthreads();  // tile t (and Q) in shared memory for every warp
    if (t == 0) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        const int r = lane % 8 + ((lane / 8) % 2) * 8;
        LdMatrixX4(qf[kc], SharedAddress(qs + r * kStride + kc * 16 + (lane / 16) * 8));
      }
    }
    const __nv_bfloat16* ks = stages + (t % S) * 2 * kTile * kStride;
    const __nv_bfloat16* vs = ks + kTile * kStride;
    float s[2][4] = {};
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t b[4];
      const int j = warp * 16 + lane % 8 + (lane / 16) * 8;
      LdMatrixX4(b, SharedAddress(ks + j * kStride + kc * 16 + ((lane / 8) % 2) * 8));
      MmaBf16(s[0], qf[kc], b[0], b[1]);
      MmaBf16(s[1], qf[kc], b[2], b[3]);
    }
    const int tok0 = t * kTile + warp * 16;  // within the split
    if (tok0 + 16 > n) {
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (tok0 + nb * 8 + (lane % 4) * 2 + e >= n) s[nb][e] = s[nb][2 + e] = -INFINITY;
        }
      }
    }
    float corr_a, corr_b;  // a warp whose tokens are all past n keeps m = -inf, p = 0
    OnlineSoftmaxStep(s, scale_log2, m_a, m_b, l_a, l_b, corr_a, corr_b);
    const uint32_t p[4] = {PackBf16(s[0][0], s[0][1]), PackBf16(s[0][2], s[0][3]),
                           PackBf16(s[1][0], s[1][1]), PackBf16(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      o[2 * dp][0] *= corr_a;
      o[2 * dp][1] *= corr_a;
      o[2 * dp][2] *= corr_b;
      o[2 * dp][3] *= corr_b;
      o[2 * dp + 1][0] *= corr_a;
      o[2 * dp + 1][1] *= corr_a;
      o[2 * dp + 1][2] *= corr_b;
      o[2 * dp + 1][3] *= corr_b;
      uint32_t b[4];
      const int j = warp * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      LdMatrixX4Trans(b, SharedAddress(vs + j * kStride + dp * 16 + (lane / 16) * 8));
      MmaBf16(o[2 * dp], p, b[0], b[1]);
      MmaBf16(o[2 * dp + 1], p, b[2], b[3]);
    }
    __syncthreads();  // every warp is done with this stage before tile t + S refills it
  }

  // Merge the warps: per row, M = max of the warps' maxima, L and O their sums rescaled to M.
  l_a = QuadSum(l_a);
  l_b = QuadSum(l_b);
  auto* mo = reinterpret_cast<float*>(stages);  // [kWarps][kRows][D]
  float* ml = mo + kWarps * kRows * D;          // [kWarps][kRows][m, l]
  const int row_a = lane / 4, row_b = row_a + 8;
  if (lane % 4 == 0) {
    ml[(warp * kRows + row_a) * 2] = m_a;
    ml[(warp * kRows + row_a) * 2 + 1] = l_a;
    ml[(warp * kRows + row_b) * 2] = m_b;
    ml[(warp * kRows + row_b) * 2 + 1] = l_b;
  }
  __syncthreads();
  float top_a = -INFINITY, top_b = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    top_a = fmaxf(top_a, ml[(w * kRows + row_a) * 2]);
    top_b = fmaxf(top_b, ml[(w * kRows + row_b) * 2]);
  }
  const float f_a = m_a == -INFINITY ? 0.0f : exp2f(m_a - top_a);
  const float f_b = m_b == -INFINITY ? 0.0f : exp2f(m_b - top_b);
  float* mo_a = mo + (warp * kRows + row_a) * D + (lane % 4) * 2;
  float* mo_b = mo + (warp * kRows + row_b) * D + (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    mo_a[i * 8] = o[i][0] * f_a;
    mo_a[i * 8 + 1] = o[i][1] * f_a;
    mo_b[i * 8] = o[i][2] * f_b;
    mo_b[i * 8 + 1] = o[i][3] * f_b;
  }
  __syncthreads();
  const int heads = min(group, kRows);
  for (int idx = threadIdx.x; idx < heads * D; idx += kWarps * 32) {
    const int r = idx / D, d = idx % D;
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, ml[(w * kRows + r) * 2]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float m = ml[(w * kRows + r) * 2];
      sum += m == -INFINITY ? 0.0f : ml[(w * kRows + r) * 2 + 1] * exp2f(m - top);
      acc += mo[(w * kRows + r) * D + d];
    }
    const int h = h0 + r;
    if (splits == 1) {
      out[(q_row * layout.num_heads + h) * D + d] = FromFloat<T>(acc / sum);
    } else {
      // The combine pass works in natural-log units: exp2(x) = exp(x ln 2).
      float* part = partial + ((i_row * layout.num_heads + h) * splits + blockIdx.z) * (D + 2);
      if (d == 0) {
        part[0] = top == -INFINITY ? -INFINITY : top * 0.6931471805599453f;
        part[1] = sum;
      }
      part[2 + d] = acc;
    }
  }
}

template <typename T, int D, int S>
Status Launch(const T* q, const DecodeRows& rows, const __nv_bfloat16* k_cache,
              const __nv_bfloat16* v_cache, const PagedKvLayout& layout, const DecodeSplit& plan,
              float* workspace, T* out, cudaStream_t stream) {
  constexpr size_t kSmem = SharedBytes<D, S>();
  static std::atomic<uint64_t> configured{0};
  SPARK_RETURN_IF_ERROR(AllowSharedMemory(DecodeMmaKernel<T, D, S>, kSmem, configured));
  static_assert(MergeBytes<D>() <= size_t{2 * S * kTile} * (D + kPad) * sizeof(__nv_bfloat16),
                "the warps' merge fits in the pipeline stages");
  if (plan.split_len > kMaxSplitLen) {
    return InvalidArgumentError("tensor-core decode attention: splits of " +
                                std::to_string(plan.split_len) + " tokens (at most " +
                                std::to_string(kMaxSplitLen) + ")");
  }
  const dim3 grid(layout.num_kv_heads, static_cast<unsigned>(rows.rows), plan.splits);
  SPARK_CUDA_RETURN_IF_ERROR(LaunchDependent(DecodeMmaKernel<T, D, S>, grid, kWarps * 32, kSmem,
                                             stream, q, rows, k_cache, v_cache, layout, plan.splits,
                                             plan.split_len, workspace, out));
  return Status::Ok();
}

// Three stages for a plan whose rows fill every SM, where an SM keeps two blocks of them (H200's
// 228 KB; GB10's ~100 KB keeps two stages). Batch 1 (8-16 blocks) keeps two: there the third
// tile's copies, issued before the dependent-launch wait, slowed the step (the notes' "Three
// pipeline stages in decode attention"). The fit is decided from the current device once per
// process (its GPUs are of one kind).
bool ThreeStages(const DecodeSplit& plan) {
  static const bool fits = [] {
    int device = 0, per_sm = 0, per_block = 0, reserved = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) !=
            cudaSuccess) {
      return false;
    }
    constexpr size_t kBytes = SharedBytes<128, 3>();
    return size_t(per_block) >= kBytes && size_t(per_sm) >= 2 * (kBytes + size_t(reserved));
  }();
  return plan.full_grid && fits;
}

}  // namespace

bool DecodeMmaShapeSupported(const PagedKvLayout& layout) {
  return (layout.head_dim == 64 || layout.head_dim == 128) && layout.num_kv_heads > 0 &&
         layout.num_heads / layout.num_kv_heads <= kRows;
}

bool DecodeMmaSupports(const PagedKvLayout& layout, const void* q, const void* k_cache,
                       const void* v_cache, const void* out) {
  return DecodeMmaShapeSupported(layout) && Aligned16(q) && Aligned16(k_cache) &&
         Aligned16(v_cache) && Aligned16(out);
}

template <typename T>
Status PagedDecodeAttentionMma(const T* q, const DecodeRows& rows, const __nv_bfloat16* k_cache,
                               const __nv_bfloat16* v_cache, const PagedKvLayout& layout,
                               const DecodeSplit& plan, float* workspace, T* out,
                               cudaStream_t stream) {
  const bool three = ThreeStages(plan);
  if (layout.head_dim == 64) {
    return three
               ? Launch<T, 64, 3>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream)
               : Launch<T, 64, 2>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
  }
  if (layout.head_dim == 128) {
    return three
               ? Launch<T, 128, 3>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream)
               : Launch<T, 128, 2>(q, rows, k_cache, v_cache, layout, plan, workspace, out, stream);
  }
  return InvalidArgumentError("tensor-core decode attention: head_dim " +
                              std::to_string(layout.head_dim) + " is not supported (64 or 128)");
}

template Status PagedDecodeAttentionMma(const float*, const DecodeRows&, const __nv_bfloat16*,
                                        const __nv_bfloat16*, const PagedKvLayout&,
                                        const DecodeSplit&, float*, float*, cudaStream_t);
template Status PagedDecodeAttentionMma(const __nv_bfloat16*, const DecodeRows&,
                                        const __nv_bfloat16*, const __nv_bfloat16*,
                                        const PagedKvLayout&, const DecodeSplit&, float*,
                                        __nv_bfloat16*, cudaStream_t);

}  // namespace spark::kernels::detail
