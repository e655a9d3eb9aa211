// One decode token through a whole stack of dense pre-norm layers (Qwen3's: RMSNorm, q/k/v,
// per-head q/k norm and RoPE, paged attention over a bf16 cache, o, RMSNorm, SwiGLU MLP) in a
// single persistent kernel, for batch 1 with bf16 weights.
//
// Why: at batch 1 a step is a pass over the weights, and launching ~8 kernels per layer leaves the
// memory idle at every boundary (a kernel's ramp and tail, the small kernels between the GEMVs).
// Here one block per SM streams its share of every weight matrix of the step, in order, through
// a ring of 8 KB shared-memory slots (bulk async copies issued by one producer thread); the
// weights do not depend on the activations, so the stream runs ahead across phase boundaries as
// far as the ring reaches, while sixteen consumer warps wait for the activations at grid-wide
// barriers (5 a layer). A piece of the stream is whole rows, or a slot's worth of one long row,
// and belongs to one warp, which waits for it, multiplies it by x (in shared memory) and gives
// the slot back without a block-wide barrier.
//
// Per layer, with B blocks: every block normalises the residual h itself (it needs all of it);
// block b computes rows [R b / B, R (b + 1) / B) of q/k/v; attention runs as (KV head, 64-token)
// items over the blocks (each item copies its K/V rows to shared memory, norms and rotates its
// own q heads; the newest token's k and v come straight from the q/k/v rows and are written to
// the cache by the item holding that token; the last item of a KV head to finish merges them);
// then block b computes its rows of o (added into h, its rows of h kept in shared memory), of
// gate and up (act = SiLU(gate) * up) and of down (added into h).
// Results: fp32 accumulation throughout; attention in fp32 over the bf16 cache (the newest K/V
// rounded to bf16 as stored); the order of every sum is fixed, so a step is deterministic.
// Status: correct (within 1e-6 of the layers op by op), but on the H200 still 5-7% slower than
// them (bench/engine/CUDA_BACKEND_NOTES.md), so CudaBackend runs it only when asked.
//
// Needs sm_90 or later (bulk copies, transaction barriers), all B blocks resident at once (a
// cooperative launch), head_dim 64 or 128, at most 8 query heads per KV head, hidden, q width
// and intermediate multiples of 8 and at most 12288, at most 512 rows of hidden or intermediate
// per block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace spark::kernels {

// One layer's weights and cache (device pointers).
struct DecodeStackLayer {
  const float* input_norm = nullptr;       // [hidden]
  const __nv_bfloat16* q = nullptr;        // [heads * head_dim, hidden]
  const __nv_bfloat16* k = nullptr;        // [kv_heads * head_dim, hidden]
  const __nv_bfloat16* v = nullptr;        // [kv_heads * head_dim, hidden]
  const float* q_norm = nullptr;           // [head_dim]
  const float* k_norm = nullptr;           // [head_dim]
  const __nv_bfloat16* o = nullptr;        // [hidden, heads * head_dim]
  const float* post_norm = nullptr;        // [hidden]
  const __nv_bfloat16* gate_up = nullptr;  // [2 * inter, hidden]: gate rows, then up rows
  const __nv_bfloat16* down = nullptr;     // [hidden, inter]
  __nv_bfloat16* k_cache = nullptr;        // [slots, kv_heads * head_dim]
  __nv_bfloat16* v_cache = nullptr;
};

struct DecodeStackShape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int inter = 0;
  int block_size = 0;  // tokens per KV block
  float eps = 1e-6f;
  float scale = 1.0f;  // softmax scale
};

// A step's device inputs. meta[0] is the context length (the new token included; its position
// is meta[0] - 1), slot[0] the new token's cache slot, block_table its sequence's blocks.
struct DecodeStackStep {
  const DecodeStackLayer* layers = nullptr;  // [shape.layers]
  const float* inv_freq = nullptr;           // RoPE, [head_dim / 2] (rope.h)
  const int32_t* meta = nullptr;
  const int64_t* slot = nullptr;
  const int32_t* block_table = nullptr;
};

// How a launch is laid out on the current device; the same plan for every step of a graph.
struct DecodeStackPlan {
  int blocks = 0;      // one per SM
  int ring_slots = 0;  // 8 KB shared-memory slots per block
  int max_splits = 0;  // attention splits per KV head at max_context
  size_t smem_bytes = 0;
  size_t workspace_bytes = 0;  // device scratch for DecodeStack (any contents)
};

// The plan for contexts of up to max_context tokens; FailedPrecondition naming what does not fit
// (shapes above, device older than sm_90, too little shared memory) — the caller then runs the
// layers op by op.
Result<DecodeStackPlan> PlanDecodeStack(const DecodeStackShape& shape, int max_context);

// Runs every layer for the step: h [hidden] is the residual stream (in: the token's embedding;
// out: after the last layer's MLP, before the final norm). Writes the new token's K and V into
// each layer's cache. The context length at step.meta must not exceed the plan's max_context.
Status DecodeStack(const DecodeStackShape& shape, const DecodeStackStep& step,
                   const DecodeStackPlan& plan, float* h, void* workspace, cudaStream_t stream);

}  // namespace spark::kernels
