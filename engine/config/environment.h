// The engine's environment variables, read in one place: the configuration layer that the
// engine's command line, the benchmarks' mains and the GPU tests' main share. Nothing else in
// the engine or the kernels reads the environment.
//
//   SPARK_LOG_LEVEL       default log level (--log-level overrides it)
//   SPARK_PDL=0           no programmatic dependent launch (kernels::LaunchSettings)
//   SPARK_PREFILL_STAGES  1 or 2: force the prefill attention's pipeline depth
//   SPARK_GEMM_TUNE_LOG=1 print the GEMM autotune's candidates
//   SPARK_GEMV_MAX_ROWS   1-4: the most rows a bf16 Linear runs as a GEMV (default 1; more: GEMM)
//   SPARK_TEST_STEP_DELAY_MS  testing: every rank sleeps this long inside each step with work
//                             (a slow step, for the liveness tests of the simulator)
// Thread-safety: call from main before other threads start.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::engine::config {

struct Environment {
  std::optional<std::string> log_level;  // SPARK_LOG_LEVEL when set
  bool dependent_launch = true;
  int prefill_stages = 0;  // 0: by device
  bool log_gemm_tuning = false;
  int gemv_max_rows = 1;
  int test_step_delay_ms = 0;
};

// The variables above, for `spark-engine info --json` (sparkctl refuses a profile's env entry
// that nothing in the engine reads).
std::span<const std::string_view> EnvironmentNames();
// Prefixes of the variables the libraries the engine links read themselves (NCCL_, CUDA_,
// GLOO_).
std::span<const std::string_view> LibraryEnvironmentPrefixes();

// InvalidArgument naming the variable for a value that is not one of the documented ones.
Result<Environment> ReadEnvironment();

// The NCCL settings that decide how much pinned memory NCCL takes per rank (NCCL reads them
// itself; the memory plan counts them): NCCL_BUFFSIZE, NCCL_PROTO, NCCL_MAX_NCHANNELS, each ""
// when unset. Reads the environment only; safe while other threads run (none sets it).
struct NcclBufferSettings {
  std::string buffsize, proto, max_nchannels;
};
NcclBufferSettings ReadNcclBufferSettings();

// Applies the kernel settings (a no-op in builds without CUDA). Call before the first kernel.
void ApplyKernelSettings(const Environment& env);

}  // namespace spark::engine::config
