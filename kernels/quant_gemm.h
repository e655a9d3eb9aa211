// Skinny GEMMs over weights kept in their released (quantised) types, dequantised in registers:
// out[token, n] = x[token, :] . W[n, :] for weight matrices W [n, k] in
//   kBf16      bf16 values;
//   kE4M3B32   FP8 E4M3 bytes [n, k] and a UE8M0 byte (2^(e - 127)) per 32 x 32 block,
//              scales [ceil(n / 32), k / 32] row-major (DeepSeek-V4.1's FP8; V4's 128 x 128
//              scales are repeated per 32 x 32 block, which is exact);
//   kE2M1B32   FP4 E2M1 nibbles packed two per byte [n, k / 2] (the even k in the low nibble)
//              and a UE8M0 byte per 1 x 32 block, scales [n, k / 32] (DeepSeek's routed
//              experts).
// Dequantised weights are exact in bf16 (a power-of-two scale times an E4M3 or E2M1 value), and
// activations are read as bf16, so a product is a bf16 tensor-core product with fp32
// accumulation (mma.sync m16n8k16: sm_80 and later, so the H200's sm_90 and GB10's sm_121 run
// the same code). Each warp streams 16 weight rows once per tile of up to 64 tokens; the four
// warps of a block split k, so a decode step reads every weight byte once, at any batch up to
// 64 tokens. Larger token counts loop over tiles (prefill GEMMs of dense layers go to cuBLAS
// over widened weights instead, see DequantToBf16).
//
// One entry point serves three callers through a list of work items, each a matrix (an expert)
// and a run of its tokens:
//   - a dense Linear: one matrix, tokens in order;
//   - the grouped output projection (DeepSeek's wo_a): one [groups * rows_per_group, k] matrix
//     whose row group g reads x's columns [g * k, (g + 1) * k);
//   - MoE experts: per-expert matrices and token lists built on the device (moe_grouped.h), so
//     no count travels to the host and the step can be a CUDA graph.
// Thread-safety: stateless; launches on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

enum class QuantFormat : uint8_t { kBf16, kE4M3B32, kE2M1B32 };

constexpr int kQuantBlock = 32;  // k (and, for E4M3, row) extent of a UE8M0 scale
// Tokens up to which a dense Linear pays to decode weights in registers; past it, one pass that
// widens them to bf16 for a cuBLAS GEMM costs less than rereading them per 64 tokens.
constexpr int kQuantGemmMaxRows = 64;

// A weight matrix [n, k] in backend memory. k must be a multiple of 8 (bf16), 16 (E4M3) or
// 32 (E2M1); codes 16-byte aligned.
struct QuantMatrix {
  QuantFormat format = QuantFormat::kBf16;
  const void* codes = nullptr;
  const uint8_t* scales = nullptr;  // null for bf16
  int n = 0, k = 0;
};

// A run of tokens of one matrix: tokens [first, first + count) of its list (QuantGemmArgs).
struct QuantWork {
  int32_t matrix = 0;
  int32_t first = 0;
  int32_t count = 0;
};

struct QuantGemmArgs {
  // The matrix (`single`), or a device array of them (`matrices`, indexed by QuantWork::matrix)
  // that all have single's format, n and k.
  QuantMatrix single;
  const QuantMatrix* matrices = nullptr;
  // Work items: a device array and a device count (moe_grouped.h builds them; no item holds
  // more than QuantGemmTileTokens(tokens) tokens), or, when `work` is null, the tokens
  // [0, tokens) of matrix 0 in tiles of QuantGemmTileTokens(tokens).
  const QuantWork* work = nullptr;
  const int32_t* work_count = nullptr;
  int max_work = 0;  // grid size: an upper bound of *work_count
  int64_t tokens = 0;  // with `work`: the most tokens one matrix may get
  // Activations [rows, ldx] bf16. Token j of a work item reads row x_rows[first + j] (or
  // first + j when x_rows is null), from column group * group_k where its output rows lie in
  // group `group` = row / group_rows (group_rows 0: one group).
  const __nv_bfloat16* x = nullptr;
  // The activations' low parts (x - bf16(x), rounded to bf16; SplitBf16 makes both), or null.
  // With them every product also adds W x_lo, so the activations count to about 2^-16 relative
  // instead of bf16's 2^-9, for one more tensor-core instruction per step: decode stays bound by
  // the weight bytes.
  const __nv_bfloat16* x_lo = nullptr;
  int64_t ldx = 0;
  const int32_t* x_rows = nullptr;
  int group_rows = 0;
  // Output row of token j: out_rows[first + j] (or first + j), ldo floats (or bf16) apart.
  const int32_t* out_rows = nullptr;
  int64_t ldo = 0;
  // Epilogue: kStore writes the sums (or adds them into out: accumulate), kScale multiplies them
  // by row_scale[output row] first, kSwiGlu pairs row r < n / 2 (gate) with row n / 2 + r (up):
  // silu(min(gate, limit)) * clamp(up, -limit, limit) (unclamped when limit <= 0) into column r.
  enum class Epilogue : uint8_t { kStore, kScale, kSwiGlu };
  Epilogue epilogue = Epilogue::kStore;
  bool accumulate = false;
  const float* row_scale = nullptr;
  float limit = 0.0f;
  float* out = nullptr;             // fp32 output, or
  __nv_bfloat16* out_bf16 = nullptr;  // bf16 output (one of the two)
  // Split-k over blocks (no work list; kStore or kSwiGlu): k_splits partial sums into split_out
  // [k_splits, tokens, ldo] (SwiGLU: [k_splits, tokens, n], gate and up apart), then added in
  // split order (deterministic) and stored by the epilogue. QuantGemmKSplits says how many pay
  // (a matrix of few rows leaves SMs idle otherwise).
  int k_splits = 1;
  float* split_out = nullptr;
};

// The k splits that fill the GPU for a dense product of `tokens` tokens through `w` (1: none).
int QuantGemmKSplits(const QuantMatrix& w, int64_t tokens);

// The tokens one block takes at once (8, 16, 32 or 64) when a matrix gets up to `tokens`.
int QuantGemmTileTokens(int64_t tokens);

// InvalidArgument for shapes the kernel does not take (k alignment, group rows not a multiple
// of 16, SwiGLU n odd or n / 2 not a multiple of 16, no output).
Status QuantGemm(const QuantGemmArgs& args, cudaStream_t stream);

// out [n, k] = the dequantised matrix as bf16 (exact) or fp32, for cuBLAS GEMMs of many tokens.
// out 16-byte aligned.
Status DequantToBf16(const QuantMatrix& w, __nv_bfloat16* out, cudaStream_t stream);
Status DequantToF32(const QuantMatrix& w, float* out, cudaStream_t stream);

// hi[i] = bf16(x[i]), lo[i] = bf16(x[i] - hi[i]) for count floats (a multiple of 4).
Status SplitBf16(const float* x, size_t count, __nv_bfloat16* hi, __nv_bfloat16* lo,
                 cudaStream_t stream);

}  // namespace spark::kernels
