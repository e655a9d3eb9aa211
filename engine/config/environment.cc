#include "engine/config/environment.h"

#include <cstdlib>

#include "base/strings.h"

#if SPARK_HAVE_KERNELS
#include "kernels/launch_settings.h"
#endif

namespace spark::engine::config {
namespace {

std::optional<std::string> Get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

constexpr std::string_view kNames[] = {"SPARK_LOG_LEVEL", "SPARK_PDL", "SPARK_PREFILL_STAGES",
                                        "SPARK_GEMM_TUNE_LOG", "SPARK_GEMV_MAX_ROWS",
                                        "SPARK_TEST_STEP_DELAY_MS"};
constexpr std::string_view kLibraryPrefixes[] = {"NCCL_", "CUDA_", "GLOO_"};

}  // namespace

std::span<const std::string_view> EnvironmentNames() { return kNames; }
std::span<const std::string_view> LibraryEnvironmentPrefixes() { return kLibraryPrefixes; }

Result<Environment> ReadEnvironment() {
  Environment env;
  env.log_level = Get("SPARK_LOG_LEVEL");
  if (auto v = Get("SPARK_PDL")) {
    if (*v != "0" && *v != "1") {
      return InvalidArgumentError("SPARK_PDL='" + *v + "': want 0 (off) or 1 (on, the default)");
    }
    env.dependent_launch = *v == "1";
  }
  if (auto v = Get("SPARK_PREFILL_STAGES")) {
    if (*v != "1" && *v != "2") {
      return InvalidArgumentError("SPARK_PREFILL_STAGES='" + *v +
                                  "': want 1 or 2 (unset: chosen by the GPU's shared memory)");
    }
    env.prefill_stages = *v == "1" ? 1 : 2;
  }
  if (auto v = Get("SPARK_GEMM_TUNE_LOG")) {
    if (*v != "0" && *v != "1") {
      return InvalidArgumentError("SPARK_GEMM_TUNE_LOG='" + *v + "': want 0 or 1");
    }
    env.log_gemm_tuning = *v == "1";
  }
  if (auto v = Get("SPARK_GEMV_MAX_ROWS")) {
    const std::optional<int64_t> rows = ParseInt(*v);
    if (!rows || *rows < 1 || *rows > 4) {
      return InvalidArgumentError("SPARK_GEMV_MAX_ROWS='" + *v + "': want 1 to 4");
    }
    env.gemv_max_rows = static_cast<int>(*rows);
  }
  if (auto v = Get("SPARK_TEST_STEP_DELAY_MS")) {
    const std::optional<int64_t> ms = ParseInt(*v);
    if (!ms || *ms < 0 || *ms > 600000) {
      return InvalidArgumentError("SPARK_TEST_STEP_DELAY_MS='" + *v +
                                  "': want milliseconds in [0, 600000]");
    }
    env.test_step_delay_ms = static_cast<int>(*ms);
  }
  return env;
}

NcclBufferSettings ReadNcclBufferSettings() {
  return {Get("NCCL_BUFFSIZE").value_or(""), Get("NCCL_PROTO").value_or(""),
          Get("NCCL_MAX_NCHANNELS").value_or("")};
}

void ApplyKernelSettings(const Environment& env) {
#if SPARK_HAVE_KERNELS
  kernels::SetLaunchSettings({.dependent_launch = env.dependent_launch,
                              .prefill_stages = env.prefill_stages,
                              .log_gemm_tuning = env.log_gemm_tuning,
                              .gemv_max_rows = env.gemv_max_rows});
#else
  (void)env;
#endif
}

}  // namespace spark::engine::config
