// Gated activations of the MLP: SiLU-and-mul over a fused [gate | up] projection.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i], silu(g) = g / (1 + exp(-g)).
template <typename T>
Status SiluMul(const T* gate_up, int64_t rows, int inter, T* out, cudaStream_t stream);

}  // namespace spark::kernels
