// DeepSeek-V4.1's fake quantisation (DeepseekOps::FakeQuant, engine/backend/deepseek_op_args.h):
// each block of `block` channels of a row is rounded to FP8 E4M3 or FP4 E2M1 with a per-block
// scale and widened back, in place, bit for bit as the CPU reference
// (engine/backend/cpu/cpu_deepseek_v41.cc) computes it. fp32; device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

enum class FakeQuantKind {
  kFp8Ue8m0,  // E4M3 values, power-of-two scale from amax / 448
  kFp4Ue8m0,  // E2M1 values, power-of-two scale from amax / 6
  kFp4E4m3,   // E2M1 values, E4M3-rounded scale amax / 6
};

// x [rows, width] in place. Rows whose width `block` does not divide (or block <= 0) are left
// unchanged, as the reference leaves them. Internal on a launch failure.
Status FakeQuantize(float* x, int64_t rows, int width, int block, FakeQuantKind format,
                    cudaStream_t stream);

}  // namespace spark::kernels
