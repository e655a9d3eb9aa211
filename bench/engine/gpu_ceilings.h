// The GPU's ceilings the benchmarks compare against, measured in the same run: copy bandwidth
// (read + write of 2 GiB), cuBLASLt's bf16 GEMM and, where it runs, its block-scaled FP8 GEMM at
// 8192^3 on random operands. Each figure is the median of 5 timed repetitions.
#pragma once

#include <cuda_runtime.h>

namespace spark::engine::bench {

struct GpuCeilings {
  double copy_gbs = 0;
  double bf16_tflops = 0;
  double fp8_tflops = 0;  // 0 when not measured or cuBLASLt has no FP8 GEMM here
};

GpuCeilings MeasureGpuCeilings(bool fp8);

// Median of 5 timed repetitions of `iters` calls of `fn`, in ms (CUDA events on `stream`), after
// one untimed call.
template <typename Fn>
double MedianMs(cudaStream_t stream, int iters, Fn&& fn);

}  // namespace spark::engine::bench

#include "bench/engine/gpu_ceilings_inl.h"
