// The persistent batch-1 decode kernel (decode_stack.h): one producer thread per block streams
// the block's weight rows through a ring of shared-memory slots with bulk async copies; sixteen
// consumer warps reduce them against the activations held in shared memory and meet the other
// blocks at grid barriers between the phases of a layer.
#include <algorithm>
#include <atomic>

#include "kernels/decode_stack.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"

namespace spark::kernels {
namespace {

using detail::SharedAddress;

constexpr int kConsumerWarps = 16;
constexpr int kConsumers = 32 * kConsumerWarps;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kSlotShift = 13;
constexpr int kSlotBytes = 1 << kSlotShift;  // one ring slot, one bulk copy
constexpr int kMaxK = 12288;                 // longest weight row (x in shared memory)
constexpr int kMaxShare = 512;  // rows of one matrix per block (residual and gate rows kept)
constexpr int kMaxGroup = 8;    // query heads per KV head
constexpr int kMaxHeadDim = 128;
constexpr int kItemTokens = 64;     // tokens of one attention item
constexpr int kControlBytes = 256;  // barrier counter + per-KV-head merge counters

// An attention item's shared memory (while no weights are multiplied).
struct AttentionSmem {
  float ml[kMaxGroup][2];                                   // softmax max and sum per query head
  float qs[kMaxGroup * kMaxHeadDim];                        // normed, rotated query heads
  float kn[kMaxHeadDim];                                    // the newest token's K (bf16 values)
  float sc[kMaxGroup * kItemTokens];                        // scores, then probabilities
  alignas(16) __nv_bfloat16 kt[kItemTokens * kMaxHeadDim];  // the item's K rows
  alignas(16) __nv_bfloat16 vt[kItemTokens * kMaxHeadDim];  // and V rows
};

// Shared memory besides the ring.
struct Smem {
  union alignas(16) {
    float x[kMaxK];  // the activations the weights multiply
    AttentionSmem a;
  };
  float sums[kConsumerWarps];
  int flag;
  float res[kMaxShare];   // this block's rows of the residual h (o and down add into them)
  float gate[kMaxShare];  // this block's gate rows of the layer
};

struct Workspace {
  unsigned* barrier;
  unsigned* merged;  // [kv_heads]
  float* qkv;        // [heads * head_dim + 2 * kv_heads * head_dim]
  float* attn;       // [heads * head_dim]
  float* act;        // [inter]
  float* part;       // [kv_heads, max_splits, group, head_dim + 2]
};

struct Params {
  DecodeStackShape shape;
  DecodeStackStep step;
  int ring_slots;
  int max_splits;
  float* h;
  Workspace ws;
};

__device__ __forceinline__ void ConsumerSync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
}

// Transaction barriers and bulk copies (sm_90).
__device__ __forceinline__ void BarrierInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ bool BarrierTryWait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(SharedAddress(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  while (!BarrierTryWait(bar, parity)) {
  }
}

__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SharedAddress(bar)) : "memory");
}

__device__ __forceinline__ void BarrierExpect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void BulkCopy(void* dst, const void* src, uint32_t bytes,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(SharedAddress(dst)),
      "l"(src), "r"(bytes), "r"(SharedAddress(bar))
      : "memory");
}

// All blocks of the grid: every consumer's writes before it are visible to every consumer after.
__device__ __forceinline__ void GridSync(unsigned* counter, unsigned& target) {
  ConsumerSync();
  target += gridDim.x;
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
    __threadfence();
  }
  ConsumerSync();
}

__device__ __forceinline__ float ConsumerSum(float v, Smem& sm) {
  v = detail::WarpSum(v);
  if (threadIdx.x % 32 == 0) sm.sums[threadIdx.x / 32] = v;
  ConsumerSync();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < kConsumerWarps; ++w) s += sm.sums[w];
  ConsumerSync();
  return s;
}

struct Rows {
  int begin, end;
};
// Block b's share of n rows.
__device__ __forceinline__ Rows Share(int n) {
  return {static_cast<int>(int64_t{n} * blockIdx.x / gridDim.x),
          static_cast<int>(int64_t{n} * (blockIdx.x + 1) / gridDim.x)};
}

// x = RmsNorm(h) * weight into shared memory (h written in this kernel: read through L2, once;
// each thread scales the elements it loaded).
__device__ __forceinline__ void LoadNormed(const float* h, const float* weight, int k, float eps,
                                           Smem& sm) {
  const int units = k / 4;
  float ss = 0.0f;
  for (int u = threadIdx.x; u < units; u += kConsumers) {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(h) + u);
    reinterpret_cast<float4*>(sm.x)[u] = a;
    ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  }
  const float inv = rsqrtf(ConsumerSum(ss, sm) / static_cast<float>(k) + eps);
  for (int u = threadIdx.x; u < units; u += kConsumers) {
    const float4 a = reinterpret_cast<const float4*>(sm.x)[u];
    const float4 w = __ldg(reinterpret_cast<const float4*>(weight) + u);
    reinterpret_cast<float4*>(sm.x)[u] =
        make_float4(w.x * (a.x * inv), w.y * (a.y * inv), w.z * (a.z * inv), w.w * (a.w * inv));
  }
  ConsumerSync();
}

__device__ __forceinline__ void LoadPlain(const float* src, int k, Smem& sm) {
  for (int u = threadIdx.x; u < k / 4; u += kConsumers) {
    reinterpret_cast<float4*>(sm.x)[u] = __ldcg(reinterpret_cast<const float4*>(src) + u);
  }
  ConsumerSync();
}

// 8 bf16 weights times x[8 u .. 8 u + 8) from shared memory.
__device__ __forceinline__ float Dot8(uint4 w, const float* x, int u, float acc) {
  const float4 a = reinterpret_cast<const float4*>(x)[2 * u];
  const float4 b = reinterpret_cast<const float4*>(x)[2 * u + 1];
  acc = fmaf(__uint_as_float(w.x << 16), a.x, acc);
  acc = fmaf(__uint_as_float(w.x & 0xffff0000u), a.y, acc);
  acc = fmaf(__uint_as_float(w.y << 16), a.z, acc);
  acc = fmaf(__uint_as_float(w.y & 0xffff0000u), a.w, acc);
  acc = fmaf(__uint_as_float(w.z << 16), b.x, acc);
  acc = fmaf(__uint_as_float(w.z & 0xffff0000u), b.y, acc);
  acc = fmaf(__uint_as_float(w.w << 16), b.z, acc);
  acc = fmaf(__uint_as_float(w.w & 0xffff0000u), b.w, acc);
  return acc;
}

// The ring of one block: piece g of the block's stream sits in slot g % slots; full[slot]
// completes when its bytes have landed, empty[slot] when its warp has read them, and seq[slot]
// holds the piece number the producer put there last. The producer and the consumers each keep
// a copy, with their own `next`.
struct RingSlots {
  char* data;
  uint64_t* full;
  uint64_t* empty;
  uint32_t* seq;
  int slots;
  uint32_t next;  // consumers: the first piece of the next segment; producer: the next to issue
};

// The ring as the consumers see it: piece g is complete once full[slot] finishes phase g / slots.
// A consumer may reach a piece more than a ring round ahead of the producer, when the slot's
// transaction barrier still runs an older round (whose parity would read as complete): it first
// waits for the producer to publish the piece number in seq[slot].
struct Ring : RingSlots {
  __device__ __forceinline__ void Wait(uint32_t g) const {
    const uint32_t slot = g % slots;
    while (*static_cast<volatile uint32_t*>(seq + slot) != g) {
    }
    BarrierWait(&full[slot], (g / slots) & 1);
  }
};

// What a consumer does with a finished row r of a segment (value v).
enum class Epilogue { kStore, kAddResidual, kGate, kUp };

__device__ __forceinline__ void Finish(Epilogue e, float* out, int r, float v, Smem& sm) {
  switch (e) {
    case Epilogue::kStore:  // out[r] = v
      __stcg(out + r, v);
      break;
    case Epilogue::kAddResidual: {  // this block's residual rows: out[r] += v
      const float sum = sm.res[r] + v;
      sm.res[r] = sum;
      __stcg(out + r, sum);
      break;
    }
    case Epilogue::kGate:
      sm.gate[r] = v;
      break;
    case Epilogue::kUp: {
      const float g = sm.gate[r];
      __stcg(out + r, g / (1.0f + expf(-g)) * v);
      break;
    }
  }
}

// How a segment of rows x row_bytes is cut into pieces (one bulk copy, one ring slot each): whole
// rows, as many as fit in a slot, or a row in ceil(row_bytes / slot) pieces. So every piece
// belongs to exactly one warp's rows.
struct Cut {
  uint32_t row_bytes = 0;
  int rows_per_piece = 0;  // > 0: pieces of whole rows
  int pieces_per_row = 0;  // otherwise
  Cut() = default;
  __device__ __forceinline__ explicit Cut(int k) : row_bytes(static_cast<uint32_t>(k) * 2) {
    rows_per_piece = row_bytes <= kSlotBytes ? kSlotBytes / row_bytes : 0;
    pieces_per_row = static_cast<int>((row_bytes + kSlotBytes - 1) / kSlotBytes);
  }
  __device__ __forceinline__ uint32_t Pieces(int rows) const {
    return rows_per_piece > 0 ? (rows + rows_per_piece - 1) / rows_per_piece
                              : static_cast<uint32_t>(rows) * pieces_per_row;
  }
};

// A warp's dot product of one weight row (at ring byte `at`, wrapping at ring_bytes) with x:
// lane l takes the 16-byte units l, l + 32, ..., four in flight.
__device__ __forceinline__ float RowDot(const char* ring, uint32_t at, uint32_t ring_bytes,
                                        int units, const float* x) {
  auto load = [&](int u) {
    uint32_t a = at + 16u * u;
    if (a >= ring_bytes) a -= ring_bytes;
    return *reinterpret_cast<const uint4*>(ring + a);
  };
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  int u = threadIdx.x % 32;
  for (; u + 96 < units; u += 128) {
    const uint4 w0 = load(u), w1 = load(u + 32), w2 = load(u + 64), w3 = load(u + 96);
    a0 = Dot8(w0, x, u, a0);
    a1 = Dot8(w1, x, u + 32, a1);
    a2 = Dot8(w2, x, u + 64, a2);
    a3 = Dot8(w3, x, u + 96, a3);
  }
  for (; u < units; u += 32) a0 = Dot8(load(u), x, u, a0);
  return detail::WarpSum((a0 + a1) + (a2 + a3));
}

// rows x k bf16 weights, the next segment of the stream: Finish(e, out, r, x . w[r]) for every
// row. Each warp takes every 16th piece (whole rows) or every 16th row (rows of several pieces):
// it waits for them, multiplies, and gives the pieces back itself, with no block-wide barrier.
__device__ __forceinline__ void StreamRows(Ring& ring, int rows, int k, Smem& sm, Epilogue e,
                                           float* out) {
  const Cut cut(k);
  const int units = k / 8;
  const uint32_t ring_bytes = static_cast<uint32_t>(ring.slots) << kSlotShift;
  const uint32_t first = ring.next;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* x = sm.x;
  if (cut.rows_per_piece > 0) {
    const uint32_t pieces = cut.Pieces(rows);
    for (uint32_t i = warp; i < pieces; i += kConsumerWarps) {
      const uint32_t g = first + i, slot = g % ring.slots;
      ring.Wait(g);
      const int r0 = static_cast<int>(i) * cut.rows_per_piece;
      const int r1 = min(rows, r0 + cut.rows_per_piece);
      for (int r = r0; r < r1; ++r) {
        const float v = RowDot(ring.data, (slot << kSlotShift) + (r - r0) * cut.row_bytes,
                               ring_bytes, units, x);
        if (lane == 0) Finish(e, out, r, v, sm);
      }
      __syncwarp();
      if (lane == 0) BarrierArrive(&ring.empty[slot]);
    }
    ring.next = first + pieces;
    return;
  }
  for (int r = warp; r < rows; r += kConsumerWarps) {
    const uint32_t g0 = first + static_cast<uint32_t>(r) * cut.pieces_per_row;
    for (int j = 0; j < cut.pieces_per_row; ++j) ring.Wait(g0 + j);
    // The row's pieces sit in consecutive slots (wrapping), each but the last a full slot.
    const float v = RowDot(ring.data, (g0 % ring.slots) << kSlotShift, ring_bytes, units, x);
    if (lane == 0) Finish(e, out, r, v, sm);
    __syncwarp();
    if (lane == 0) {
      for (int j = 0; j < cut.pieces_per_row; ++j) {
        BarrierArrive(&ring.empty[(g0 + j) % ring.slots]);
      }
    }
  }
  ring.next = first + cut.Pieces(rows);
}

// The producer's side of StreamRows: the same segment's pieces, in order.
struct Producer : RingSlots {
  __device__ __forceinline__ void Piece(const char* src, uint32_t n) {
    const uint32_t slot = next % slots;
    if (next >= static_cast<uint32_t>(slots)) BarrierWait(&empty[slot], (next / slots - 1) & 1);
    *static_cast<volatile uint32_t*>(seq + slot) = next;
    BarrierExpect(&full[slot], n);
    BulkCopy(data + (size_t{slot} << kSlotShift), src, n, &full[slot]);
    ++next;
  }

  // The segment's pieces as StreamRows cuts them.
  __device__ __forceinline__ void Rows(const __nv_bfloat16* w, int row0, int rows, int k) {
    if (rows <= 0) return;
    const Cut cut(k);
    const char* src = reinterpret_cast<const char*>(w + int64_t{row0} * k);
    if (cut.rows_per_piece > 0) {
      const uint32_t piece = cut.row_bytes * cut.rows_per_piece;
      const uint32_t bytes = cut.row_bytes * rows;
      for (uint32_t off = 0; off < bytes; off += piece) Piece(src + off, min(piece, bytes - off));
      return;
    }
    for (int r = 0; r < rows; ++r, src += cut.row_bytes) {
      for (uint32_t off = 0; off < cut.row_bytes; off += kSlotBytes) {
        Piece(src + off, min(static_cast<uint32_t>(kSlotBytes), cut.row_bytes - off));
      }
    }
  }
};

// A layer's weight segments in stream order: q, k and v rows of this block's share of the
// stacked q/k/v, its o rows, gate rows, up rows and down rows.
struct Segment {
  const __nv_bfloat16* w;
  int row0, rows, k;
};

__device__ __forceinline__ Segment LayerSegment(const DecodeStackShape& s,
                                                const DecodeStackLayer& L, int i) {
  const int qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  if (i < 3) {
    const Rows qkv = Share(qd + 2 * kvd);
    const int lo = i == 0 ? 0 : i == 1 ? qd : qd + kvd;
    const int hi = i == 0 ? qd : i == 1 ? qd + kvd : qd + 2 * kvd;
    const int a = max(qkv.begin, lo), b = min(qkv.end, hi);
    return {i == 0 ? L.q : i == 1 ? L.k : L.v, a - lo, b - a, s.hidden};
  }
  if (i == 3) {
    const Rows o = Share(s.hidden);
    return {L.o, o.begin, o.end - o.begin, qd};
  }
  if (i == 6) {
    const Rows o = Share(s.hidden);
    return {L.down, o.begin, o.end - o.begin, s.inter};
  }
  const Rows gu = Share(s.inter);
  return {L.gate_up, (i == 5 ? s.inter : 0) + gu.begin, gu.end - gu.begin, s.hidden};
}

constexpr int kSegments = 7;

__device__ void Produce(const Params& p, Producer& prod) {
  for (int l = 0; l < p.shape.layers; ++l) {
    const DecodeStackLayer& L = p.step.layers[l];
    for (int i = 0; i < kSegments; ++i) {
      const Segment seg = LayerSegment(p.shape, L, i);
      prod.Rows(seg.w, seg.row0, seg.rows, seg.k);
    }
  }
}

// Per-head RMSNorm and RoPE of one head (a warp; kE = head_dim / 32 elements a lane), as
// QkNormRopeWriteKv computes it; into out (shared memory), rounded to bf16 when asked.
template <int kE>
__device__ __forceinline__ void NormRopeHead(const float* in, const float* weight, float eps,
                                             float pos, const float* inv_freq, float* out,
                                             bool round) {
  const int lane = threadIdx.x % 32;
  float a[kE];
#pragma unroll
  for (int i = 0; i < kE; ++i) a[i] = __ldcg(in + lane * kE + i);
  detail::NormRopeLane<kE>(a, weight, eps, pos, inv_freq, lane);
#pragma unroll
  for (int i = 0; i < kE; ++i) {
    out[lane * kE + i] = round ? __bfloat162float(__float2bfloat16_rn(a[i])) : a[i];
  }
}

// One attention item: the query heads of KV head g over tokens [64 s, min(ctx, 64 (s + 1))).
// Its K and V rows are copied to shared memory first (the newest token's from the q/k/v rows,
// which this item also writes to the cache when it holds that token).
template <int kHd>
__device__ void AttentionItem(const Params& p, const DecodeStackLayer& L, int g, int s, int splits,
                              int ctx, int64_t new_slot, Smem& sm) {
  const DecodeStackShape& sh = p.shape;
  constexpr int kE = kHd / 32, kChunks = kHd / 8;  // 16-byte chunks per K or V row
  const int group = sh.heads / sh.kv_heads;
  const int qd = sh.heads * kHd, kvw = sh.kv_heads * kHd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = threadIdx.x;
  const int t0 = s * kItemTokens, n = min(ctx, t0 + kItemTokens) - t0;
  const bool last = t0 + n == ctx;
  const int cached = last ? n - 1 : n;  // rows read from the cache (written by earlier steps)
  const detail::SlotFinder slot_of(p.step.block_table, sh.block_size);
  for (int c = t; c < cached * kChunks; c += kConsumers) {
    const int i = c / kChunks, ch = c % kChunks;
    const int64_t at = slot_of(t0 + i) * kvw + g * kHd + ch * 8;
    detail::CpAsync16(sm.a.kt + i * kHd + ch * 8, L.k_cache + at, true);
    detail::CpAsync16(sm.a.vt + i * kHd + ch * 8, L.v_cache + at, true);
  }
  detail::CpAsyncCommit();
  const float pos = static_cast<float>(ctx - 1);
  const float* qkv = p.ws.qkv;
  if (warp < group) {
    NormRopeHead<kE>(qkv + (g * group + warp) * kHd, L.q_norm, sh.eps, pos, p.step.inv_freq,
                     sm.a.qs + warp * kHd, false);
  } else if (last && warp == group) {
    NormRopeHead<kE>(qkv + qd + g * kHd, L.k_norm, sh.eps, pos, p.step.inv_freq, sm.a.kn, true);
#pragma unroll
    for (int i = 0; i < kE; ++i) {
      const int e = lane * kE + i;
      const __nv_bfloat16 k = __float2bfloat16_rn(sm.a.kn[e]);
      L.k_cache[new_slot * kvw + g * kHd + e] = k;
      sm.a.kt[(n - 1) * kHd + e] = k;
    }
  } else if (last && warp == group + 1) {
    for (int e = lane; e < kHd; e += 32) {
      const __nv_bfloat16 v = __float2bfloat16_rn(__ldcg(qkv + qd + kvw + g * kHd + e));
      L.v_cache[new_slot * kvw + g * kHd + e] = v;
      sm.a.vt[(n - 1) * kHd + e] = v;
    }
  }
  detail::CpAsyncWaitAll();
  ConsumerSync();
  // Scores: a warp per token, a lane per kE elements of every query head of the group.
  {
    float q[kMaxGroup][kE];
#pragma unroll
    for (int h = 0; h < kMaxGroup; ++h) {
#pragma unroll
      for (int e = 0; e < kE; ++e) q[h][e] = h < group ? sm.a.qs[h * kHd + lane * kE + e] : 0.0f;
    }
    for (int i = warp; i < n; i += kConsumerWarps) {
      float kv[kE];
#pragma unroll
      for (int e = 0; e < kE; ++e) kv[e] = __bfloat162float(sm.a.kt[i * kHd + lane * kE + e]);
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) {
        if (h < group) {
          float d = 0.0f;
#pragma unroll
          for (int e = 0; e < kE; ++e) d = fmaf(q[h][e], kv[e], d);
          d = detail::WarpSum(d);
          if (lane == 0) sm.a.sc[h * kItemTokens + i] = d * sh.scale;
        }
      }
    }
  }
  ConsumerSync();
  if (warp < group) {  // softmax of head `warp` over the item's tokens
    float* sc = sm.a.sc + warp * kItemTokens;
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = fmaxf(m, sc[i]);
    m = detail::WarpMax(m);
    float l = 0.0f;
    for (int i = lane; i < n; i += 32) {
      const float e = expf(sc[i] - m);
      sc[i] = e;
      l += e;
    }
    l = detail::WarpSum(l);
    if (lane == 0) sm.a.ml[warp][0] = m, sm.a.ml[warp][1] = l;
  }
  ConsumerSync();
  // P.V: a thread per (head, element).
  const int stride = kHd + 2;
  float* part = p.ws.part + (int64_t{g} * p.max_splits + s) * group * stride;
  for (int idx = t; idx < group * kHd; idx += kConsumers) {
    const int h = idx / kHd, d = idx % kHd;
    const float* pr = sm.a.sc + h * kItemTokens;
    float o = 0.0f;
#pragma unroll 8
    for (int i = 0; i < n; ++i) o = fmaf(pr[i], __bfloat162float(sm.a.vt[i * kHd + d]), o);
    if (splits == 1) {
      __stcg(p.ws.attn + (g * group + h) * kHd + d, o / sm.a.ml[h][1]);
    } else {
      __stcg(part + h * stride + d, o);
      if (d == 0) {
        __stcg(part + h * stride + kHd, sm.a.ml[h][0]);
        __stcg(part + h * stride + kHd + 1, sm.a.ml[h][1]);
      }
    }
  }
  if (splits > 1) {  // the last item of KV head g to finish merges its splits
    __threadfence();
    ConsumerSync();
    if (t == 0) sm.flag = atomicAdd(p.ws.merged + g, 1u) == static_cast<unsigned>(splits - 1);
    ConsumerSync();
    if (sm.flag) {
      __threadfence();
      const float* parts = p.ws.part + int64_t{g} * p.max_splits * group * stride;
      for (int idx = t; idx < group * kHd; idx += kConsumers) {
        const int h = idx / kHd, d = idx % kHd;
        float m = -INFINITY;
        for (int i = 0; i < splits; ++i) {
          m = fmaxf(m, __ldcg(parts + (i * group + h) * stride + kHd));
        }
        float num = 0.0f, den = 0.0f;
        for (int i = 0; i < splits; ++i) {
          const float* q = parts + (i * group + h) * stride;
          const float w = expf(__ldcg(q + kHd) - m);
          num = fmaf(w, __ldcg(q + d), num);
          den = fmaf(w, __ldcg(q + kHd + 1), den);
        }
        __stcg(p.ws.attn + (g * group + h) * kHd + d, num / den);
      }
      if (t == 0) atomicExch(p.ws.merged + g, 0u);
    }
  }
  ConsumerSync();  // shared memory is reused by the next item
}

template <int kHd>
__device__ void Consume(const Params& p, Ring& ring, Smem& sm) {
  const DecodeStackShape& s = p.shape;
  const int qd = s.heads * kHd, kvd = s.kv_heads * kHd;
  const Rows o = Share(s.hidden), gu = Share(s.inter);
  const int ctx = p.step.meta[0];
  const int64_t new_slot = p.step.slot[0];
  const int splits = (ctx + kItemTokens - 1) / kItemTokens;
  if (splits > p.max_splits) __trap();  // the plan was made for shorter contexts
  unsigned target = 0;
  float* h = p.h;
  for (int r = threadIdx.x; r < o.end - o.begin; r += kConsumers)
    sm.res[r] = __ldcg(h + o.begin + r);
  for (int l = 0; l < s.layers; ++l) {
    const DecodeStackLayer L = p.step.layers[l];
    for (int i = 0; i < kSegments; ++i) {
      if (i == 0) {
        LoadNormed(h, L.input_norm, s.hidden, s.eps, sm);
      } else if (i == 3) {
        GridSync(p.ws.barrier, target);
        for (int item = blockIdx.x; item < s.kv_heads * splits; item += gridDim.x) {
          AttentionItem<kHd>(p, L, item / splits, item % splits, splits, ctx, new_slot, sm);
        }
        GridSync(p.ws.barrier, target);
        LoadPlain(p.ws.attn, qd, sm);
      } else if (i == 4) {
        GridSync(p.ws.barrier, target);
        LoadNormed(h, L.post_norm, s.hidden, s.eps, sm);
      } else if (i == 5) {
        ConsumerSync();  // every gate row is in sm.gate
      } else if (i == 6) {
        GridSync(p.ws.barrier, target);
        LoadPlain(p.ws.act, s.inter, sm);
      }
      const Segment seg = LayerSegment(s, L, i);
      if (seg.rows <= 0) continue;
      Epilogue e = Epilogue::kStore;
      float* out = nullptr;
      if (i < 3) {
        out = p.ws.qkv + (i == 0 ? 0 : i == 1 ? qd : qd + kvd) + seg.row0;
      } else if (i == 3 || i == 6) {
        e = Epilogue::kAddResidual, out = h + o.begin;
      } else {
        e = i == 4 ? Epilogue::kGate : Epilogue::kUp, out = p.ws.act + gu.begin;
      }
      StreamRows(ring, seg.rows, seg.k, sm, e, out);
    }
    GridSync(p.ws.barrier, target);
  }
}

// Bytes after the ring taken by the barriers and piece numbers (Smem follows, 16-byte aligned).
__host__ __device__ constexpr size_t SeqEnd(int slots) {
  return (size_t(slots) * (2 * sizeof(uint64_t) + sizeof(uint32_t)) + 15) / 16 * 16;
}

template <int kHd>
__global__ void __launch_bounds__(kThreads, 1) DecodeStackKernel(Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) char smem[];
  char* ring_data = smem;
  const size_t ring_bytes = size_t{static_cast<unsigned>(p.ring_slots)} << kSlotShift;
  auto* full = reinterpret_cast<uint64_t*>(smem + ring_bytes);
  uint64_t* empty = full + p.ring_slots;
  auto* seq = reinterpret_cast<uint32_t*>(empty + p.ring_slots);
  Smem& sm = *reinterpret_cast<Smem*>(smem + ring_bytes + SeqEnd(p.ring_slots));
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.ring_slots; ++i) {
      BarrierInit(&full[i], 1);
      BarrierInit(&empty[i], 1);
      seq[i] = 0xffffffffu;
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) {
      Producer prod{{ring_data, full, empty, seq, p.ring_slots, 0}};
      Produce(p, prod);
    }
    return;
  }
  Ring ring{{ring_data, full, empty, seq, p.ring_slots, 0}};
  Consume<kHd>(p, ring, sm);
#else
  __trap();
#endif
}

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

struct Layout {
  size_t qkv, attn, act, part, total;
};

Layout WorkspaceLayout(const DecodeStackShape& s, int max_splits) {
  const size_t qd = size_t(s.heads) * s.head_dim, kvd = size_t(s.kv_heads) * s.head_dim;
  Layout l;
  l.qkv = kControlBytes;
  l.attn = l.qkv + Align256((qd + 2 * kvd) * sizeof(float));
  l.act = l.attn + Align256(qd * sizeof(float));
  l.part = l.act + Align256(size_t(s.inter) * sizeof(float));
  l.total = l.part + Align256(size_t(s.kv_heads) * max_splits * (s.heads / s.kv_heads) *
                              (s.head_dim + 2) * sizeof(float));
  return l;
}

template <int kHd>
Status Configure(size_t smem, int* blocks_per_sm) {
  static std::atomic<uint64_t> configured{0};
  SPARK_RETURN_IF_ERROR(detail::AllowSharedMemory(DecodeStackKernel<kHd>, smem, configured));
  SPARK_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks_per_sm, DecodeStackKernel<kHd>, kThreads, smem));
  return Status::Ok();
}

}  // namespace

Result<DecodeStackPlan> PlanDecodeStack(const DecodeStackShape& s, int max_context) {
  auto refuse = [](const std::string& why) {
    return FailedPreconditionError("decode stack: " + why);
  };
  if (s.layers <= 0 || s.hidden <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.inter <= 0 ||
      s.block_size <= 0 || max_context <= 0) {
    return refuse("empty shape");
  }
  if (s.head_dim != 64 && s.head_dim != 128) return refuse("head_dim is not 64 or 128");
  if (s.heads % s.kv_heads != 0 || s.heads / s.kv_heads > kMaxGroup) {
    return refuse("more than 8 query heads per KV head");
  }
  if (1 + s.kv_heads > kControlBytes / 4) return refuse("more than 63 KV heads");
  const int qd = s.heads * s.head_dim;
  for (int k : {s.hidden, qd, s.inter}) {
    if (k % 8 != 0 || k > kMaxK) return refuse("a row length is not a multiple of 8 up to 12288");
  }
  int device = 0, major = 0, sms = 0, optin = 0;
  SPARK_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SPARK_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int coop = 0;
  SPARK_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  if (major < 9) return refuse("needs sm_90 or later");
  if (coop == 0) return refuse("the device has no cooperative launch");
  DecodeStackPlan plan;
  const size_t fixed = sizeof(Smem) + 64;  // + slack for the barriers' alignment
  const size_t per_slot = kSlotBytes + 2 * sizeof(uint64_t) + sizeof(uint32_t);
  if (static_cast<size_t>(optin) < fixed + 3 * per_slot) return refuse("too little shared memory");
  plan.ring_slots = static_cast<int>((static_cast<size_t>(optin) - fixed) / per_slot);
  const int longest = 2 * std::max({s.hidden, qd, s.inter});  // bytes of the longest weight row
  if (plan.ring_slots < 2 * ((longest + kSlotBytes - 1) / kSlotBytes)) {
    return refuse("two of the longest weight rows do not fit in the ring");
  }
  plan.smem_bytes = (size_t{static_cast<unsigned>(plan.ring_slots)} << kSlotShift) +
                    SeqEnd(plan.ring_slots) + sizeof(Smem);
  int per_sm = 0;
  SPARK_RETURN_IF_ERROR(s.head_dim == 64 ? Configure<64>(plan.smem_bytes, &per_sm)
                                         : Configure<128>(plan.smem_bytes, &per_sm));
  if (per_sm < 1) return refuse("a block does not fit on an SM");
  plan.blocks = sms;
  if ((std::max(s.hidden, s.inter) + sms - 1) / sms > kMaxShare) {
    return refuse("more than 512 rows of a matrix per block");
  }
  plan.max_splits = (max_context + kItemTokens - 1) / kItemTokens;
  plan.workspace_bytes = WorkspaceLayout(s, plan.max_splits).total;
  return plan;
}

Status DecodeStack(const DecodeStackShape& shape, const DecodeStackStep& step,
                   const DecodeStackPlan& plan, float* h, void* workspace, cudaStream_t stream) {
  if (plan.blocks <= 0) return InvalidArgumentError("decode stack: no plan");
  char* ws = static_cast<char*>(workspace);
  const Layout layout = WorkspaceLayout(shape, plan.max_splits);
  Params p{shape, step, plan.ring_slots, plan.max_splits, h, {}};
  p.ws.barrier = reinterpret_cast<unsigned*>(ws);
  p.ws.merged = p.ws.barrier + 1;
  p.ws.qkv = reinterpret_cast<float*>(ws + layout.qkv);
  p.ws.attn = reinterpret_cast<float*>(ws + layout.attn);
  p.ws.act = reinterpret_cast<float*>(ws + layout.act);
  p.ws.part = reinterpret_cast<float*>(ws + layout.part);
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws, 0, kControlBytes, stream));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(plan.blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = plan.smem_bytes;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  auto kernel = shape.head_dim == 64 ? DecodeStackKernel<64> : DecodeStackKernel<128>;
  SPARK_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, kernel, p));
  return Status::Ok();
}

}  // namespace spark::kernels
