// Gated activations of the MLP: SiLU-and-mul over a fused [gate | up] projection.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i], silu(g) = g / (1 + exp(-g)). When
// out_bf16 is not null it also receives out rounded to bf16 (the input of a bf16 GEMM).
template <typename T>
Status SiluMul(const T* gate_up, int64_t rows, int inter, T* out, cudaStream_t stream,
               __nv_bfloat16* out_bf16 = nullptr);

}  // namespace spark::kernels
