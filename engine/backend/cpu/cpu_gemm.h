// The inner kernel of CpuBackend::Linear: out[r][o] = dot(x[r], w[o]) for a block of token rows
// and a block of weight rows, with both held in registers so that each load of x feeds several
// outputs and each load of w feeds several rows (GCC vector extensions: portable to x86 SSE/AVX
// and Arm NEON without intrinsics).
//
// Determinism: every output is summed in exactly Dot's order (cpu_backend.h): eight lane sums
// over i = 0, 8, 16, ..., combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the tail in
// order. The result is therefore bitwise equal to Dot whatever the blocking, the thread count
// or the vector width the compiler picks.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace spark::engine::backend::cpu {

// Token rows per register block and weight rows per register block of GemmTile.
inline constexpr int kGemmRowBlock = 2;
inline constexpr int kGemmOutBlock = 2;

// For r in [0, rows) and o in [o_begin, o_end):
//   out[r * out_stride + o] = Dot(x + r * in_features, w + o * in_features, in_features).
void GemmTile(const float* x, int64_t rows, int in_features, const float* w, int o_begin,
              int o_end, float* out, int64_t out_stride);

}  // namespace spark::engine::backend::cpu
