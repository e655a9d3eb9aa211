#include "engine/backend/backend_factory.h"

#include "engine/backend/cpu/cpu_backend.h"
#if SPARK_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda_check.h"
#endif

namespace spark::engine::backend {

std::vector<std::string> CompiledBackends() {
#if SPARK_HAVE_CUDA_BACKEND
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") {
    return std::unique_ptr<Backend>(std::make_unique<cpu::CpuBackend>(options.threads));
  }
  if (options.name != "cuda") {
    return InvalidArgumentError("--backend: '" + options.name + "' is not a backend (want cpu " +
                                "or cuda)");
  }
#if SPARK_HAVE_CUDA_BACKEND
  const int devices = kernels::CudaDeviceCount();
  if (devices == 0) {
    return UnavailableError(
        "--backend cuda: no CUDA device is visible (check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES), or use --backend cpu");
  }
  cuda::CudaBackend::Options co;
  co.device = options.rank % devices;
  co.step_timeout = options.step_timeout;
  co.bf16_attention = options.bf16_attention;
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::Create(co));
  return std::unique_ptr<Backend>(std::move(b));
#else
  return FailedPreconditionError(
      "--backend cuda: this spark-engine was built without CUDA; "
      "rebuild on a machine with the CUDA toolkit (nvcc) and "
      "-DSPARK_CUDA=ON, or use --backend cpu");
#endif
}

}  // namespace spark::engine::backend
