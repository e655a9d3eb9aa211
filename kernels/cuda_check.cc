#include "kernels/cuda_check.h"

#include <unistd.h>

#include "kernels/launch_settings.h"

namespace spark::kernels {
namespace {

std::string Where(const char* expr, const char* file, int line) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  return std::string(expr) + " failed at " + file + ":" + std::to_string(line) + " on " + host +
         " device " + std::to_string(device);
}

}  // namespace

Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  std::string message =
      Where(expr, file, line) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    return ResourceExhaustedError(message + " (lower the KV cache budget in the profile)");
  }
  return InternalError(message);
}

Status CublasError(int status, const char* expr, const char* file, int line) {
  return InternalError(Where(expr, file, line) + ": cuBLAS status " + std::to_string(status));
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

namespace {

LaunchSettings& Settings() {
  static LaunchSettings settings;
  return settings;
}

}  // namespace

void SetLaunchSettings(const LaunchSettings& settings) { Settings() = settings; }
const LaunchSettings& GetLaunchSettings() { return Settings(); }

namespace detail {

bool DependentLaunchEnabled() { return GetLaunchSettings().dependent_launch; }

}  // namespace detail

}  // namespace spark::kernels
