// Embedding lookup over a vocabulary-parallel table shard.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// out[t] = table[ids[t] - row_begin] when row_begin <= ids[t] < row_begin + rows, else zeros
// (the other ranks' rows arrive in the all-reduce that follows). ids is a device pointer.
template <typename T>
Status Embedding(const T* table, int64_t row_begin, int64_t rows, int hidden, const int32_t* ids,
                 int64_t tokens, T* out, cudaStream_t stream);

// The same lookup for the ids an ArgMax chose on the device: pairs [parts][tokens][2] of
// (largest value, its id) per vocabulary part, merged as backend::MergeArgMax does (the largest
// value, ties to the lower id). Lets a greedy step feed the next without the host.
template <typename T>
Status EmbeddingOfArgMax(const T* table, int64_t row_begin, int64_t rows, int hidden,
                         const float* pairs, int parts, int64_t tokens, T* out,
                         cudaStream_t stream);

}  // namespace spark::kernels
