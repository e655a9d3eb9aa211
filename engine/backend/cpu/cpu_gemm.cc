#include "engine/backend/cpu/cpu_gemm.h"

#include <cstring>

namespace spark::engine::backend::cpu {
namespace {

// Eight floats: Dot's eight lane sums. The compiler maps it onto whatever the target has (two
// SSE or NEON registers, one AVX register).
typedef float V8 __attribute__((vector_size(32)));

// V8 never crosses a function boundary by value: on targets narrower than 32 bytes that would
// change the calling convention (GCC's -Wpsabi).
[[gnu::always_inline]] inline void Load(const float* p, V8* v) {
  std::memcpy(v, p, sizeof(V8));  // An unaligned vector load.
}

[[gnu::always_inline]] inline float Combine(const V8& a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// R token rows x O weight rows: R*O accumulators, R + O loads per 8 inputs. Always inlined, so
// that each target clone of GemmTile gets its own code.
template <int R, int O>
[[gnu::always_inline]] inline void Block(const float* const* xs, const float* const* ws, int n, float* const* outs,
           int64_t o_offset) {
  V8 acc[R][O];
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) acc[r][o] = V8{0, 0, 0, 0, 0, 0, 0, 0};
  }
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    V8 xv[R];
    for (int r = 0; r < R; ++r) Load(xs[r] + i, &xv[r]);
    for (int o = 0; o < O; ++o) {
      V8 wv;
      Load(ws[o] + i, &wv);
      for (int r = 0; r < R; ++r) acc[r][o] += xv[r] * wv;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) {
      float sum = Combine(acc[r][o]);
      for (int j = i; j < n; ++j) sum += xs[r][j] * ws[o][j];
      outs[r][o_offset + o] = sum;
    }
  }
}

// One block of R rows over the weight rows [o_begin, o_end).
template <int R>
[[gnu::always_inline]] inline void Rows(const float* const* xs, const float* w, int n, int o_begin, int o_end,
          float* const* outs) {
  int o = o_begin;
  for (; o + kGemmOutBlock <= o_end; o += kGemmOutBlock) {
    const float* ws[kGemmOutBlock];
    for (int k = 0; k < kGemmOutBlock; ++k) ws[k] = w + static_cast<int64_t>(o + k) * n;
    Block<R, kGemmOutBlock>(xs, ws, n, outs, o);
  }
  for (; o < o_end; ++o) {
    const float* ws[1] = {w + static_cast<int64_t>(o) * n};
    Block<R, 1>(xs, ws, n, outs, o);
  }
}

}  // namespace

// On x86-64 an AVX2 clone (one 256-bit register per V8, chosen at load time when the CPU has it)
// next to the baseline SSE2 one; on aarch64 the same code in NEON (two 128-bit registers per V8).
// All run the same IEEE operations in the same order (no FMA: this library is compiled with
// -ffp-contract=off), so they give the same bits.
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
void GemmTile(const float* x, int64_t rows, int in_features, const float* w, int o_begin,
              int o_end, float* out, int64_t out_stride) {
  int64_t r = 0;
  const float* xs[kGemmRowBlock];
  float* outs[kGemmRowBlock];
  auto point = [&](int64_t first, int count) {
    for (int k = 0; k < count; ++k) {
      xs[k] = x + (first + k) * in_features;
      outs[k] = out + (first + k) * out_stride;
    }
  };
  for (; r + kGemmRowBlock <= rows; r += kGemmRowBlock) {
    point(r, kGemmRowBlock);
    Rows<kGemmRowBlock>(xs, w, in_features, o_begin, o_end, outs);
  }
  for (; r < rows; ++r) {
    point(r, 1);
    Rows<1>(xs, w, in_features, o_begin, o_end, outs);
  }
}

}  // namespace spark::engine::backend::cpu
