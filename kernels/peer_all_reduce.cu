// The one-shot peer all-reduce and its fusion with the residual add and RMSNorm (see
// peer_all_reduce.h).
#include <algorithm>
#include <string>
#include <utility>

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
  size_t half;        // kSignal: floats into a region's data
  int buffer, prev;   // kOneWay: this call's buffer and the one before
  size_t prev_count;  // kOneWay: floats the call before summed
  uint64_t start_ns;  // for the timeout
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
  return {regions,
          epoch,
          (epoch & 1) * a.capacity,
          static_cast<int>(epoch % 3),
          static_cast<int>((epoch + 2) % 3),
          static_cast<size_t>(__ldcg(a.epochs + 2)),
          GlobalTimerNs()};
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
__device__ __forceinline__ void EndCall(const PeerAllReduceArgs& a, const Call& c, size_t count) {
  __syncthreads();
  if (threadIdx.x == 0) {
    auto* done = reinterpret_cast<unsigned long long*>(a.epochs + 1);
    if (atomicAdd(done, 1ull) == gridDim.x - 1) {
      *done = 0;
      a.epochs[2] = count;
      a.epochs[0] = c.epoch;
    }
  }
}

// kOneWay. The empty pattern, and a value's bits as sent (a NaN with the pattern becomes another
// NaN).
constexpr uint32_t kEmpty = 0xFFFFFFFFu;

__device__ __forceinline__ uint32_t Sent(float v) {
  const uint32_t u = __float_as_uint(v);
  return u == kEmpty ? 0x7FFFFFFFu : u;
}

__device__ __forceinline__ uint4 Sent(float4 v) {
  return make_uint4(Sent(v.x), Sent(v.y), Sent(v.z), Sent(v.w));
}

// Rank `slot`'s part of `buffer` in a region.
__device__ __forceinline__ uint32_t* Slot(const PeerAllReduceArgs& a, void* region, int buffer,
                                          int slot) {
  return reinterpret_cast<uint32_t*>(Data(region)) +
         (static_cast<size_t>(buffer) * a.world + slot) * a.capacity;
}

// This rank's part of the sum at `offset`, stored into every peer's region.
__device__ __forceinline__ void Push(const PeerAllReduceArgs& a, const Call& c, size_t offset,
                                     uint4 v) {
  for (int p = 0; p < a.world; ++p) {
    if (p != a.rank)
      *reinterpret_cast<uint4*>(Slot(a, c.regions[p], c.buffer, a.rank) + offset) = v;
  }
}

__device__ __forceinline__ void Push(const PeerAllReduceArgs& a, const Call& c, size_t offset,
                                     uint32_t v) {
  for (int p = 0; p < a.world; ++p) {
    if (p != a.rank) Slot(a, c.regions[p], c.buffer, a.rank)[offset] = v;
  }
}

__device__ __forceinline__ void CheckTimeout(const PeerAllReduceArgs& a, const Call& c) {
  if (GlobalTimerNs() - c.start_ns > a.timeout_ns) __trap();  // the peer never came
}

// Waits until all four floats at p have arrived.
__device__ __forceinline__ uint4 Poll(const PeerAllReduceArgs& a, const Call& c,
                                      const uint32_t* p) {
  uint4 v;
  while (true) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    if (v.x != kEmpty && v.y != kEmpty && v.z != kEmpty && v.w != kEmpty) return v;
    CheckTimeout(a, c);
  }
}

__device__ __forceinline__ uint32_t Poll1(const PeerAllReduceArgs& a, const Call& c,
                                          const uint32_t* p) {
  uint32_t v;
  while (true) {
    asm volatile("ld.volatile.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    if (v != kEmpty) return v;
    CheckTimeout(a, c);
  }
}

// The sum at `offset` in rank order: this rank's `own` bits, the others' from this region.
__device__ __forceinline__ float4 Gather(const PeerAllReduceArgs& a, const Call& c, size_t offset,
                                         uint4 own) {
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int r = 0; r < a.world; ++r) {
    const uint4 u =
        r == a.rank ? own : Poll(a, c, Slot(a, c.regions[a.rank], c.buffer, r) + offset);
    s.x += __uint_as_float(u.x);
    s.y += __uint_as_float(u.y);
    s.z += __uint_as_float(u.z);
    s.w += __uint_as_float(u.w);
  }
  return s;
}

__device__ __forceinline__ float Gather(const PeerAllReduceArgs& a, const Call& c, size_t offset,
                                        uint32_t own) {
  float s = 0.0f;
  for (int r = 0; r < a.world; ++r) {
    s += __uint_as_float(
        r == a.rank ? own : Poll1(a, c, Slot(a, c.regions[a.rank], c.buffer, r) + offset));
  }
  return s;
}

// This block's share of the call before's buffer in this region, set back to empty (the
// capacity is a multiple of 4, so each slot is 16-byte aligned).
__device__ __forceinline__ void ClearPrevious(const PeerAllReduceArgs& a, const Call& c) {
  const size_t n = c.prev_count;
  size_t per = (n + gridDim.x - 1) / gridDim.x;
  per = (per + 3) / 4 * 4;
  const size_t begin = blockIdx.x * per, end = min(n, begin + per);
  if (begin >= end) return;
  const size_t vec_end = begin + (end - begin) / 4 * 4;
  const uint4 empty = make_uint4(kEmpty, kEmpty, kEmpty, kEmpty);
  for (int p = 0; p < a.world; ++p) {
    if (p == a.rank) continue;
    uint32_t* slot = Slot(a, c.regions[a.rank], c.prev, p);
    for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += blockDim.x * 4) {
      *reinterpret_cast<uint4*>(slot + i) = empty;
    }
    for (size_t i = vec_end + threadIdx.x; i < end; i += blockDim.x) slot[i] = kEmpty;
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

template <bool kOneWay>
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
  if constexpr (kOneWay) {
    for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
      Push(a, c, i, Sent(*reinterpret_cast<const float4*>(data + i)));
    }
    for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) Push(a, c, i, Sent(data[i]));
    for (size_t i = begin + threadIdx.x * 4; i < vec_end; i += kThreads * 4) {
      float4* d = reinterpret_cast<float4*>(data + i);
      *d = Gather(a, c, i, Sent(*d));
    }
    for (size_t i = vec_end + threadIdx.x; i < end; i += kThreads) {
      data[i] = Gather(a, c, i, Sent(data[i]));
    }
    ClearPrevious(a, c);
  } else {
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
  }
  EndCall(a, c, count);
}

// One block a row, laid out as kernels/norm.cu's RmsNormKernel (same threads, same chunks per
// thread, same block sum), so the result is bit-identical to the sum and that kernel.
template <bool kOneWay>
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
  float4* d = reinterpret_cast<float4*>(delta + base);
  if constexpr (kOneWay) {
    for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
      Push(a, c, base + size_t{static_cast<unsigned>(i)} * 4, Sent(d[i]));
    }
  } else {
    float4* mine = reinterpret_cast<float4*>(Data(regions[a.rank]) + c.half + base);
    for (int i = threadIdx.x; i < chunks; i += blockDim.x) mine[i] = d[i];
    Barrier(a, c, row);
  }
  float4* hr = reinterpret_cast<float4*>(h + base);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const size_t offset = base + size_t{static_cast<unsigned>(i)} * 4;
    const float4 s = kOneWay ? Gather(a, c, offset, Sent(d[i])) : SumOverRanks(a, c, offset);
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
  if constexpr (kOneWay) ClearPrevious(a, c);
  EndCall(a, c, size_t(gridDim.x) * dim);
}

Status CheckArgs(const PeerAllReduceArgs& args) {
  if (args.world < 1 || args.world > kPeerMaxRanks || args.rank < 0 || args.rank >= args.world) {
    return InvalidArgumentError("peer all-reduce: rank " + std::to_string(args.rank) + " of " +
                                std::to_string(args.world) + " (at most " +
                                std::to_string(kPeerMaxRanks) + " ranks)");
  }
  if (args.capacity % 4 != 0) {
    return InvalidArgumentError("peer all-reduce: a capacity of " + std::to_string(args.capacity) +
                                " floats (a multiple of 4)");
  }
  return Status::Ok();
}

template <typename... Params, typename... Args>
cudaError_t Launch(const PeerAllReduceArgs& a, void (*signal)(Params...),
                   void (*one_way)(Params...), int blocks, int threads, cudaStream_t stream,
                   Args&&... args) {
  return detail::LaunchDependent(a.protocol == PeerProtocol::kOneWay ? one_way : signal, blocks,
                                 threads, 0, stream, a, std::forward<Args>(args)...);
}

}  // namespace

size_t PeerRegionBytes(size_t capacity_floats, int world) {
  return kSignalBytes +
         3 * static_cast<size_t>(std::max(world, 1)) * capacity_floats * sizeof(float);
}

Status PeerRegionInit(void* region, size_t capacity_floats, int world) {
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemset(region, 0, kSignalBytes));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemset(static_cast<char*>(region) + kSignalBytes, 0xFF,
                                        PeerRegionBytes(capacity_floats, world) - kSignalBytes));
  SPARK_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return Status::Ok();
}

Status PeerAllReduceSum(const PeerAllReduceArgs& args, float* data, size_t count,
                        cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(CheckArgs(args));
  if (count > args.capacity || !detail::Aligned16(data)) {
    return InvalidArgumentError("peer all-reduce: " + std::to_string(count) + " floats (capacity " +
                                std::to_string(args.capacity) +
                                ") at a pointer that must be 16-byte aligned");
  }
  if (count == 0) return Status::Ok();
  size_t per_block = std::max(kMinPerBlock, (count + kPeerMaxBlocks - 1) / kPeerMaxBlocks);
  per_block = (per_block + 3) / 4 * 4;
  const int blocks = static_cast<int>((count + per_block - 1) / per_block);
  SPARK_CUDA_RETURN_IF_ERROR(Launch(args, PeerAllReduceKernel<false>, PeerAllReduceKernel<true>,
                                    blocks, kThreads, stream, data, count, per_block));
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
  SPARK_RETURN_IF_ERROR(CheckArgs(args));
  if (!PeerAddRmsNormFits(args, delta, rows, dim, h, weight, out, out_bf16)) {
    return InvalidArgumentError("peer all-reduce + RMSNorm: " + std::to_string(rows) + " rows of " +
                                std::to_string(dim) + " (at most " +
                                std::to_string(kPeerMaxBlocks) + " rows and " +
                                std::to_string(args.capacity) +
                                " floats in all; dim a multiple of 4; 16-byte aligned pointers)");
  }
  const int chunks = dim / 4;
  const int threads = chunks >= 1024 ? 1024 : (chunks + 31) / 32 * 32;
  SPARK_CUDA_RETURN_IF_ERROR(Launch(args, PeerAddRmsNormKernel<false>, PeerAddRmsNormKernel<true>,
                                    static_cast<int>(rows), threads, stream, delta, dim, h, weight,
                                    eps, out, out_bf16));
  return Status::Ok();
}

}  // namespace spark::kernels
