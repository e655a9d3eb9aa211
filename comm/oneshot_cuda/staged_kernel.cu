// The staged one-shot kernel (see staged_kernel.h).
#include <algorithm>
#include <string>

#include "comm/oneshot_cuda/staged_kernel.h"

namespace spark::comm::oneshot {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 8;  // few enough to be resident together: they meet at the doorbell
constexpr size_t kPerBlock = 4096;

__device__ __forceinline__ void StoreRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t LoadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t LoadVolatile(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

__device__ void Fail(const StagedArgs& a, uint64_t code, int source) {
  StoreRelease(&a.control->error, code << 32 | static_cast<uint32_t>(source));
  __threadfence_system();
  __trap();
}

// gather == 0: out = sum of the ranks' `in` in rank order (out may equal in);
// gather == 1: out[s * count + i] = rank s's in[i].
__global__ void StagedKernel(StagedArgs a, const float* in, float* out, size_t count,
                             int gather) {
  __shared__ uint64_t seq_shared;
  if (threadIdx.x == 0) seq_shared = a.state->epoch + 1;
  __syncthreads();
  const uint64_t seq = seq_shared;
  const int parity = static_cast<int>(seq & 1);
  const size_t per = (count + gridDim.x - 1) / gridDim.x;
  const size_t begin = min(count, per * blockIdx.x), end = min(count, begin + per);
  auto slot = [&](int s) {
    return reinterpret_cast<float*>(a.slots + (static_cast<size_t>(parity) * a.world + s) *
                                                  a.slot_bytes);
  };
  // 1. This rank's slice into its own slot, then the doorbell once every block has staged.
  float* own = slot(a.rank);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) own[i] = in[i];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (atomicAdd(&a.state->arrived, 1u) == gridDim.x - 1) {
      a.state->arrived = 0;
      a.control->bell_bytes[parity] = count * sizeof(float);
      StoreRelease(&a.control->bell_seq, seq);
    }
    // 2. Every peer's slice of this call (the host's wire threads set the flags).
    const uint64_t start = GlobalTimerNs();
    for (int s = 0; s < a.world; ++s) {
      if (s == a.rank) continue;
      const int index = parity * a.world + s;
      while (LoadAcquire(&a.flags[index]) != seq) {
        if (LoadVolatile(&a.control->abort) != 0) Fail(a, kStagedAborted, s);
        if (GlobalTimerNs() - start > a.timeout_ns) Fail(a, kStagedTimeout, s);
      }
      if (a.sizes[index] != count * sizeof(float)) Fail(a, kStagedSize, s);
    }
  }
  __syncthreads();
  // 3. Rank order, the same on every rank.
  if (gather == 0) {
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      float acc = a.rank == 0 ? in[i] : slot(0)[i];
      for (int s = 1; s < a.world; ++s) acc += s == a.rank ? in[i] : slot(s)[i];
      out[i] = acc;
    }
  } else {
    for (int s = 0; s < a.world; ++s) {
      const float* src = s == a.rank ? in : slot(s);
      for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) out[s * count + i] = src[i];
    }
  }
  // 4. The last block to finish advances the epoch for the next call on this stream.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&a.state->done, 1u) == gridDim.x - 1) {
      a.state->done = 0;
      a.state->epoch = seq;
    }
  }
}

Status Launch(const StagedArgs& a, const float* in, float* out, size_t count, int gather,
              cudaStream_t stream) {
  if (count * sizeof(float) > a.slot_bytes) {
    return InvalidArgumentError("one-shot (staged): " + std::to_string(count * sizeof(float)) +
                                " bytes exceed the mailbox slot of " +
                                std::to_string(a.slot_bytes));
  }
  const int blocks =
      static_cast<int>(std::clamp<size_t>((count + kPerBlock - 1) / kPerBlock, 1, kMaxBlocks));
  StagedKernel<<<blocks, kThreads, 0, stream>>>(a, in, out, count, gather);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return InternalError(std::string("one-shot (staged) kernel launch: ") +
                         cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace

Status StagedAllReduceSum(const StagedArgs& args, float* data, size_t count,
                          cudaStream_t stream) {
  return Launch(args, data, data, count, 0, stream);
}

Status StagedAllGather(const StagedArgs& args, const float* in, size_t count, float* out,
                       cudaStream_t stream) {
  return Launch(args, in, out, count, 1, stream);
}

}  // namespace spark::comm::oneshot
