// The one-shot peer all-reduce (see peer_all_reduce.h).
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"
#include "kernels/peer_all_reduce.h"

namespace spark::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMinPerBlock = 1024;  // floats: fewer, larger slices below this
constexpr size_t kSignalBytes = size_t{kPeerMaxBlocks} * kPeerMaxRanks * sizeof(uint64_t);

__device__ __forceinline__ uint64_t* Signals(void* region) {
  return static_cast<uint64_t*>(region);
}

__device__ __forceinline__ float* Data(void* region) {
  return reinterpret_cast<float*>(static_cast<char*>(region) + kSignalBytes);
}

__device__ __forceinline__ void StoreRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t LoadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kThreads)
    PeerAllReduceKernel(PeerAllReduceArgs a, float* __restrict__ data, size_t count,
                        size_t per_block) {
  detail::WaitForPrecedingKernel();
  const int b = blockIdx.x;
  const uint64_t epoch = a.epochs[b] + 1;
  const size_t half = (epoch & 1) * a.capacity;
  // The region pointers in shared memory: a runtime index into the kernel parameters would
  // copy them to a per-thread stack frame.
  __shared__ void* regions[kPeerMaxRanks];
  if (threadIdx.x < kPeerMaxRanks) {
#pragma unroll
    for (int r = 0; r < kPeerMaxRanks; ++r) {
      if (r == static_cast<int>(threadIdx.x)) regions[r] = a.regions[r];
    }
  }
  __syncthreads();
  const size_t begin = b * per_block, end = min(count, begin + per_block);
  // per_block and begin are multiples of 4 and data is 16-byte aligned: float4 up to the tail.
  const size_t vec_end = begin + (end > begin ? (end - begin) / 4 * 4 : 0);
  float* mine = Data(regions[a.rank]) + half;
  for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
    *reinterpret_cast<float4*>(mine + i) = *reinterpret_cast<const float4*>(data + i);
  }
  for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) mine[i] = data[i];
  __threadfence_system();
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < a.world && peer != a.rank) {
    StoreRelease(Signals(regions[peer]) + b * kPeerMaxRanks + a.rank, epoch);
    const uint64_t* slot = Signals(regions[a.rank]) + b * kPeerMaxRanks + peer;
    const uint64_t start = GlobalTimerNs();
    while (LoadAcquire(slot) < epoch) {
      if (GlobalTimerNs() - start > a.timeout_ns) __trap();  // the peer never came
    }
  }
  __syncthreads();
  for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int r = 0; r < a.world; ++r) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(Data(regions[r]) + half + i));
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    *reinterpret_cast<float4*>(data + i) = s;
  }
  for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) {
    float s = 0.0f;
    for (int r = 0; r < a.world; ++r) s += __ldcg(Data(regions[r]) + half + i);
    data[i] = s;
  }
  if (threadIdx.x == 0) a.epochs[b] = epoch;
}

}  // namespace

size_t PeerRegionBytes(size_t capacity_floats) {
  return kSignalBytes + 2 * capacity_floats * sizeof(float);
}

Status PeerAllReduceSum(const PeerAllReduceArgs& args, float* data, size_t count,
                        cudaStream_t stream) {
  if (args.world < 1 || args.world > kPeerMaxRanks || args.rank < 0 || args.rank >= args.world) {
    return InvalidArgumentError("peer all-reduce: rank " + std::to_string(args.rank) + " of " +
                                std::to_string(args.world) + " (at most " +
                                std::to_string(kPeerMaxRanks) + " ranks)");
  }
  if (count > args.capacity || reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    return InvalidArgumentError("peer all-reduce: " + std::to_string(count) + " floats (capacity " +
                                std::to_string(args.capacity) +
                                ") at a pointer that must be 16-byte aligned");
  }
  if (count == 0) return Status::Ok();
  size_t per_block = std::max(kMinPerBlock, (count + kPeerMaxBlocks - 1) / kPeerMaxBlocks);
  per_block = (per_block + 3) / 4 * 4;
  const int blocks = static_cast<int>((count + per_block - 1) / per_block);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(PeerAllReduceKernel, blocks, kThreads, 0,
                                                     stream, args, data, count, per_block));
  return Status::Ok();
}

}  // namespace spark::kernels
