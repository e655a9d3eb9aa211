// The one-shot peer all-reduce and its fusion with the residual add and RMSNorm (see
// peer_all_reduce.h).
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
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

// One call of one block: the regions (in shared memory: a runtime index into the kernel
// parameters would copy them to a per-thread stack frame), the epoch and its half.
struct Call {
  void** regions;
  uint64_t epoch;
  size_t half;  // floats into a region's data
};

// Every thread of the block; after the wait for the preceding kernel (the call before on this
// stream has finished, so the epoch it advanced is in memory).
__device__ __forceinline__ Call BeginCall(const PeerAllReduceArgs& a, void** regions) {
  if (threadIdx.x < kPeerMaxRanks) {
#pragma unroll
    for (int r = 0; r < kPeerMaxRanks; ++r) {
      if (r == static_cast<int>(threadIdx.x)) regions[r] = a.regions[r];
    }
  }
  __syncthreads();
  const uint64_t epoch = __ldcg(a.epochs) + 1;
  return {regions, epoch, (epoch & 1) * a.capacity};
}

// After the block wrote its slice into its own half: tells every peer's block b, and waits
// until each of them has done the same.
__device__ __forceinline__ void Barrier(const PeerAllReduceArgs& a, const Call& c, int b) {
  __threadfence_system();
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < a.world && peer != a.rank) {
    StoreRelease(Signals(c.regions[peer]) + b * kPeerMaxRanks + a.rank, c.epoch);
    const uint64_t* slot = Signals(c.regions[a.rank]) + b * kPeerMaxRanks + peer;
    const uint64_t start = GlobalTimerNs();
    while (LoadAcquire(slot) < c.epoch) {
      if (GlobalTimerNs() - start > a.timeout_ns) __trap();  // the peer never came
    }
  }
  __syncthreads();
}

// The block is done; the last block of the call to finish advances the epoch.
__device__ __forceinline__ void EndCall(const PeerAllReduceArgs& a, const Call& c) {
  __syncthreads();
  if (threadIdx.x == 0) {
    auto* done = reinterpret_cast<unsigned long long*>(a.epochs + 1);
    if (atomicAdd(done, 1ull) == gridDim.x - 1) {
      *done = 0;
      a.epochs[0] = c.epoch;
    }
  }
}

// Sum over ranks, in rank order, of four floats at `offset` of each rank's half.
__device__ __forceinline__ float4 SumOverRanks(const PeerAllReduceArgs& a, const Call& c,
                                               size_t offset) {
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int r = 0; r < a.world; ++r) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(Data(c.regions[r]) + c.half + offset));
    s.x += v.x;
    s.y += v.y;
    s.z += v.z;
    s.w += v.w;
  }
  return s;
}

__global__ void __launch_bounds__(kThreads)
    PeerAllReduceKernel(PeerAllReduceArgs a, float* __restrict__ data, size_t count,
                        size_t per_block) {
  detail::WaitForPrecedingKernel();
  __shared__ void* regions[kPeerMaxRanks];
  const Call c = BeginCall(a, regions);
  const int b = blockIdx.x;
  const size_t begin = b * per_block, end = min(count, begin + per_block);
  // per_block and begin are multiples of 4 and data is 16-byte aligned: float4 up to the tail.
  const size_t vec_end = begin + (end > begin ? (end - begin) / 4 * 4 : 0);
  float* mine = Data(regions[a.rank]) + c.half;
  for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
    *reinterpret_cast<float4*>(mine + i) = *reinterpret_cast<const float4*>(data + i);
  }
  for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) mine[i] = data[i];
  Barrier(a, c, b);
  for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
    *reinterpret_cast<float4*>(data + i) = SumOverRanks(a, c, i);
  }
  for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) {
    float s = 0.0f;
    for (int r = 0; r < a.world; ++r) s += __ldcg(Data(regions[r]) + c.half + i);
    data[i] = s;
  }
  EndCall(a, c);
}

// One block a row, laid out as kernels/norm.cu's RmsNormKernel (same threads, same chunks per
// thread, same block sum), so the result is bit-identical to the sum and that kernel.
__global__ void __launch_bounds__(1024)
    PeerAddRmsNormKernel(PeerAllReduceArgs a, float* __restrict__ delta, int dim,
                         float* __restrict__ h, const float* __restrict__ weight, float eps,
                         float* __restrict__ out, __nv_bfloat16* __restrict__ out_bf16) {
  detail::LetSuccessorLaunchThenWait();
  __shared__ void* regions[kPeerMaxRanks];
  __shared__ float scratch[32];
  const Call c = BeginCall(a, regions);
  const int row = blockIdx.x;
  const int chunks = dim / 4;
  const size_t base = size_t{static_cast<unsigned>(row)} * dim;
  float4* mine = reinterpret_cast<float4*>(Data(regions[a.rank]) + c.half + base);
  float4* d = reinterpret_cast<float4*>(delta + base);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) mine[i] = d[i];
  Barrier(a, c, row);
  float4* hr = reinterpret_cast<float4*>(h + base);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const float4 s = SumOverRanks(a, c, base + size_t{static_cast<unsigned>(i)} * 4);
    d[i] = s;
    const float4 r = hr[i];
    const float4 v = make_float4(s.x + r.x, s.y + r.y, s.z + r.z, s.w + r.w);
    hr[i] = v;
    sum += v.x * v.x;
    sum += v.y * v.y;
    sum += v.z * v.z;
    sum += v.w * v.w;
  }
  sum = detail::BlockSum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(dim) + eps);
  const float4* w = reinterpret_cast<const float4*>(weight);
  float4* o = reinterpret_cast<float4*>(out + base);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const float4 v = hr[i], wv = w[i];
    const float4 r =
        make_float4(wv.x * (v.x * inv), wv.y * (v.y * inv), wv.z * (v.z * inv), wv.w * (v.w * inv));
    o[i] = r;
    if (out_bf16 != nullptr) detail::StoreBf16x4(out_bf16 + base + i * 4, r.x, r.y, r.z, r.w);
  }
  EndCall(a, c);
}

Status CheckRanks(const PeerAllReduceArgs& args) {
  if (args.world < 1 || args.world > kPeerMaxRanks || args.rank < 0 || args.rank >= args.world) {
    return InvalidArgumentError("peer all-reduce: rank " + std::to_string(args.rank) + " of " +
                                std::to_string(args.world) + " (at most " +
                                std::to_string(kPeerMaxRanks) + " ranks)");
  }
  return Status::Ok();
}

}  // namespace

size_t PeerRegionBytes(size_t capacity_floats) {
  return kSignalBytes + 2 * capacity_floats * sizeof(float);
}

Status PeerAllReduceSum(const PeerAllReduceArgs& args, float* data, size_t count,
                        cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckRanks(args));
  if (count > args.capacity || !detail::Aligned16(data)) {
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

bool PeerAddRmsNormFits(const PeerAllReduceArgs& args, const float* delta, int64_t rows, int dim,
                        const float* h, const float* weight, const float* out,
                        const __nv_bfloat16* out_bf16) {
  using detail::Aligned16;
  return rows >= 1 && rows <= kPeerMaxBlocks && dim >= 4 && dim % 4 == 0 &&
         static_cast<size_t>(rows) * dim <= args.capacity && Aligned16(delta) && Aligned16(h) &&
         Aligned16(weight) && Aligned16(out) && (out_bf16 == nullptr || Aligned16(out_bf16));
}

Status PeerAllReduceAddRmsNorm(const PeerAllReduceArgs& args, float* delta, int64_t rows, int dim,
                               float* h, const float* weight, float eps, float* out,
                               __nv_bfloat16* out_bf16, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckRanks(args));
  if (!PeerAddRmsNormFits(args, delta, rows, dim, h, weight, out, out_bf16)) {
    return InvalidArgumentError("peer all-reduce + RMSNorm: " + std::to_string(rows) + " rows of " +
                                std::to_string(dim) + " (at most " +
                                std::to_string(kPeerMaxBlocks) + " rows and " +
                                std::to_string(args.capacity) +
                                " floats in all; dim a multiple of 4; 16-byte aligned pointers)");
  }
  const int chunks = dim / 4;
  const int threads = chunks >= 1024 ? 1024 : (chunks + 31) / 32 * 32;
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(PeerAddRmsNormKernel, static_cast<int>(rows),
                                                     threads, 0, stream, args, delta, dim, h,
                                                     weight, eps, out, out_bf16));
  return Status::Ok();
}

}  // namespace spark::kernels
