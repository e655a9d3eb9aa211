// Token sampling on the GPU: greedy, temperature, top-k and top-p, one block per row.
// The random numbers come in (one uniform per row, from the caller's seeded generator), so a
// run is reproducible and the kernel is a plain function of its inputs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// Per-row parameters, device arrays of `rows` entries each.
struct SamplingRows {
  const float* temperature = nullptr;  // <= 0: greedy (argmax, ties to the lower id)
  const int32_t* top_k = nullptr;      // <= 0: off
  const float* top_p = nullptr;        // >= 1: off
  const float* uniform = nullptr;      // in [0, 1)
};

// For each row of logits [rows, vocab]: p_i = exp((x_i - max) / temperature); keep the top_k
// largest p (all ties of the k-th value), then the fewest largest whose mass reaches top_p of
// what is left (ties kept); pick the first id (in id order) where the running sum of kept p
// exceeds uniform * (sum of kept p). tokens[row] is the chosen id.
Status Sample(const float* logits, int64_t rows, int vocab, const SamplingRows& params,
              int32_t* tokens, cudaStream_t stream);

// Greedy decoding over a slice of the vocabulary: out[r] = {max of logits[r, 0..vocab),
// index_offset + the first column holding it} as two floats (-inf and index_offset when vocab
// is 0; NaN when the row holds a NaN), so vocabulary-parallel ranks can gather and merge their
// pairs.
Status ArgMaxPairs(const float* logits, int64_t rows, int vocab, int64_t index_offset, float* out,
                   cudaStream_t stream);

}  // namespace spark::kernels
