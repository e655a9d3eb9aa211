// Launch helpers shared by the kernels: programmatic dependent launch, the per-device opt-in to
// large dynamic shared memory, and the alignment test of the vectorised paths.
//
// Programmatic dependent launch (sm_90 and later; GB10's sm_121 too) for the small kernels of a
// decode step. A kernel launched with LaunchDependent may be placed on the GPU while the kernel
// before it on the stream is still finishing, so its launch and start-up overlap that kernel's
// tail instead of following it; in CUDA graphs the edge is kept. Every such kernel must call
// WaitForPrecedingKernel() before it touches memory the kernel before may write (it returns once
// the preceding kernel has finished and its writes are visible; what no kernel writes, like the
// GEMVs' weights and decode attention's older K/V entries, may be loaded before it) and then lets
// its own successor be placed (griddepcontrol.launch_dependents). The GEMVs let it later, the
// small kernels between them earlier (the helpers below). LaunchSettings::dependent_launch
// turns the attribute off (plain stream order). Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "kernels/cuda_check.h"

namespace spark::kernels::detail {

// Whether launches carry the attribute (LaunchSettings::dependent_launch).
bool DependentLaunchEnabled();

// The two dependent-launch steps. Every thread of a kernel calls both (in one of the orders
// below, or the GEMVs' own, see gemv.cu); a block that never lets its successor launch does so
// only when it exits.
__device__ __forceinline__ void WaitOnlyForPrecedingKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void LetSuccessorLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Wait, then let the successor be placed: one kernel deep.
__device__ __forceinline__ void WaitForPrecedingKernel() {
  WaitOnlyForPrecedingKernel();
  LetSuccessorLaunch();
}

// The other way round, for the small kernels between the GEMVs (the RMSNorms, the q/k norm +
// RoPE + KV write, the tensor-core decode attention): the successor may be placed while this
// kernel still waits for the one before, so the next GEMV's blocks and first weight loads join
// earlier. Order still holds: a kernel's wait returns only once the kernel before has finished,
// which it could only do after its own wait. Faster for these kernels, slower when every kernel,
// the GEMVs included, does it (bench/engine/CUDA_BACKEND_NOTES.md, "Starting kernels earlier").
__device__ __forceinline__ void LetSuccessorLaunchThenWait() {
  LetSuccessorLaunch();
  WaitOnlyForPrecedingKernel();
}

template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = DependentLaunchEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Lets `kernel` use `bytes` of dynamic shared memory on the current device. The opt-in is a
// per-device function attribute (not a stream operation, so legal while a graph is captured):
// `configured` (one per kernel instantiation) remembers the devices already set, so `bytes` must
// be the most any launch of the kernel asks for (a later launch above the first call's bytes
// fails with cudaErrorInvalidValue).
template <typename Kernel>
Status AllowSharedMemory(Kernel kernel, size_t bytes, std::atomic<uint64_t>& configured) {
  int device = 0;
  SPARK_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const uint64_t bit = uint64_t{1} << (device % 64);
  if ((configured.load(std::memory_order_acquire) & bit) == 0) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    configured.fetch_or(bit, std::memory_order_release);
  }
  return Status::Ok();
}

}  // namespace spark::kernels::detail
