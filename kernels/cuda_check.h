// Turning CUDA runtime and cuBLAS errors into spark::Status. The message names the failing
// expression, file:line, the host and the device, so an error from one rank of a multi-node
// run says where it came from (the nccl-tests habit).
// Thread-safety: the functions only read the calling thread's CUDA state.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace spark::kernels {

// Internal (or ResourceExhausted for cudaErrorMemoryAllocation) "<expr> failed at
// file:line on <host> device <n>: <CUDA error name>: <description>".
Status CudaError(cudaError_t err, const char* expr, const char* file, int line);
// Internal naming the cuBLAS status code, in the same form.
Status CublasError(int status, const char* expr, const char* file, int line);

// Number of CUDA devices; 0 when there is no driver or no device (never an error).
int CudaDeviceCount();

}  // namespace spark::kernels

#define SPARK_CUDA_RETURN_IF_ERROR(expr)                                              \
  do {                                                                                \
    const cudaError_t spark_cuda_err_ = (expr);                                       \
    if (spark_cuda_err_ != cudaSuccess)                                               \
      return ::spark::kernels::CudaError(spark_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define SPARK_CUBLAS_RETURN_IF_ERROR(expr)                                               \
  do {                                                                                   \
    const int spark_cublas_st_ = static_cast<int>(expr);                                 \
    if (spark_cublas_st_ != 0)                                                           \
      return ::spark::kernels::CublasError(spark_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error (bad configuration, no kernel image for this GPU).
#define SPARK_CUDA_RETURN_IF_LAUNCH_FAILED() SPARK_CUDA_RETURN_IF_ERROR(cudaGetLastError())
