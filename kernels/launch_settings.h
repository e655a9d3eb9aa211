// Process-wide launch settings of the kernels, for comparisons and for tests that need a plain
// launch order. The configuration layer (engine/config/environment.h: the engine's command line,
// the benchmarks' and the GPU tests' mains) sets them once, before the first launch; the defaults
// are what production runs.
// Thread-safety: set before any kernel runs; read-only afterwards.
#pragma once

namespace spark::kernels {

struct LaunchSettings {
  // Programmatic dependent launch of the decode kernels (launch.cuh). Off: plain stream order,
  // which two ranks sharing one GPU need (their graphs stall each other otherwise).
  bool dependent_launch = true;
  // Pipeline stages of the tensor-core prefill attention: 0 picks by the device's shared memory
  // (two on H100/H200, one on GB10); 1 or 2 forces one.
  int prefill_stages = 0;
  // Print every GEMM autotune's candidates and times to stderr.
  bool log_gemm_tuning = false;
  // The most rows (tokens) a bf16 Linear runs as a GEMV (kernels/gemv.h, up to kGemvMaxRows);
  // more go to the GEMM path. One: on the H200 the GEMV's time grows by about a third of a
  // weight pass per extra row, and the GEMM path reads the weights once for any small batch
  // (bench/engine/CUDA_BACKEND_NOTES.md, "GEMV rows"). The GEMV keeps fp32 activations, the
  // GEMM rounds them to bf16.
  int gemv_max_rows = 1;
};

void SetLaunchSettings(const LaunchSettings& settings);
const LaunchSettings& GetLaunchSettings();

}  // namespace spark::kernels
