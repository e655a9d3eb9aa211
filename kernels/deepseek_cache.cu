// DeepSeek cache kernels (deepseek_cache.h): RoPE over the trailing channels (one block per
// token, the token's cos/sin in shared memory), field writes (four floats a thread where the
// rows align) and the compressors' pooling (one block per entry, a thread per channel looping
// over the sources, then the entry's norm and rotation in shared memory).
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_cache.h"
#include "kernels/deepseek_device.cuh"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

using detail::Load4;
using detail::RowAt;
using detail::RowsAligned;
using detail::Store4;

constexpr int kThreads = 256;

// Grid of a grid-stride loop over `items`: enough blocks to fill the device, no more.
unsigned GridFor(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::CeilDiv(items, kThreads), 1, 65536));
}

__global__ void RopeTrailingKernel(float* x, const int32_t* __restrict__ positions, int heads,
                                   int dim, TrailingRope rope) {
  detail::WaitForPrecedingKernel();
  extern __shared__ float angles[];  // cos [half] | sin [half]
  const int half = rope.rope_dim / 2;
  const int64_t t = blockIdx.x;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    detail::RopeAngle(rope, positions[t], i, &angles[i], &angles[half + i]);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* r = x + (t * heads + h) * dim + dim - rope.rope_dim;
    const float a = r[2 * i], b = r[2 * i + 1], c = angles[i], s = angles[half + i];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = b * c + a * s;
  }
}

// kVec floats of `src` (kVec 4: one 16-byte access).
template <int kVec>
__device__ __forceinline__ void Copy(const float* src, float (&dst)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 v = Load4(src, true);
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  } else {
    dst[0] = *src;
  }
}

template <int kVec>
__device__ __forceinline__ void Store(const float (&src)[kVec], float* dst) {
  if constexpr (kVec == 4) {
    Store4(dst, make_float4(src[0], src[1], src[2], src[3]), true);
  } else {
    *dst = src[0];
  }
}

// kVec floats a thread; kVec 4 needs width % 4 == 0 and aligned rows on both sides.
template <int kVec>
__global__ void WriteRowsKernel(const float* __restrict__ rows, const int64_t* __restrict__ slots,
                                int64_t tokens, CacheRows f) {
  detail::WaitForPrecedingKernel();
  const int per_row = f.width / kVec;
  const int64_t n = tokens * per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int c = static_cast<int>(i % per_row) * kVec;
    float v[kVec];
    Copy<kVec>(rows + t * f.width + c, v);
    Store<kVec>(v, RowAt(f, slots[t]) + c);
  }
}

template <int kVec>
__global__ void WriteCompressorRowsKernel(CompressorRows in, const int32_t* __restrict__ positions,
                                          const int64_t* __restrict__ slots, int64_t tokens) {
  detail::WaitForPrecedingKernel();
  const int per_row = in.width / kVec;
  const int64_t n = tokens * per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / per_row;
    const int c = static_cast<int>(i % per_row) * kVec;
    const int64_t src = t * in.width + c;
    float kv[kVec], gate[kVec];
    Copy<kVec>(in.kv + src, kv);
    Store<kVec>(kv, RowAt(in.kv_field, slots[t]) + c);
    if (in.gate == nullptr) continue;
    Copy<kVec>(in.gate + src, gate);
    if (in.ape != nullptr) {
      float ape[kVec];
      Copy<kVec>(in.ape + int64_t{positions[t] % in.ratio} * in.width + c, ape);
#pragma unroll
      for (int e = 0; e < kVec; ++e) gate[e] += ape[e];
    }
    Store<kVec>(gate, RowAt(in.gate_field, slots[t]) + c);
  }
}

// One block per entry; entry channels in shared memory [dim].
__global__ void PoolEntriesKernel(PoolArgs a) {
  detail::WaitForPrecedingKernel();
  extern __shared__ float entry[];
  __shared__ float red[32];
  const int64_t e = blockIdx.x;
  const int64_t* slots = a.source_slots + e * a.pool;
  const bool gated = a.gate.base != nullptr;
  for (int ch = threadIdx.x; ch < a.dim; ch += blockDim.x) {
    // The softmax's maximum over the present sources, then the weighted sum.
    float max = -INFINITY;
    for (int i = 0; i < a.pool; ++i) {
      const int64_t slot = slots[i];
      if (slot < 0) continue;
      const int channel = (a.overlap && i >= a.pool / 2 ? a.dim : 0) + ch;
      max = fmaxf(max, gated ? RowAt(a.gate, slot)[channel] : 0.0f);
    }
    float sum = 0.0f, acc = 0.0f;
    if (isfinite(max)) {  // the reference's softmax gives all zeros otherwise
      for (int i = 0; i < a.pool; ++i) {
        const int64_t slot = slots[i];
        if (slot < 0) continue;
        const int channel = (a.overlap && i >= a.pool / 2 ? a.dim : 0) + ch;
        const float w = expf((gated ? RowAt(a.gate, slot)[channel] : 0.0f) - max);
        sum += w;
        acc += w * RowAt(a.kv, slot)[channel];
      }
    }
    entry[ch] = sum > 0.0f ? acc / sum : 0.0f;
  }
  __syncthreads();
  if (a.norm != nullptr) {
    float ss = 0.0f;
    for (int ch = threadIdx.x; ch < a.dim; ch += blockDim.x) ss += entry[ch] * entry[ch];
    ss = detail::BlockSum(ss, red);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.dim) + a.eps);
    for (int ch = threadIdx.x; ch < a.dim; ch += blockDim.x) {
      entry[ch] = a.norm[ch] * (entry[ch] * inv);
    }
    __syncthreads();
  }
  if (a.rope.inv_freq != nullptr) {
    float* r = entry + a.dim - a.rope.rope_dim;
    for (int i = threadIdx.x; i < a.rope.rope_dim / 2; i += blockDim.x) {
      float c, s;
      detail::RopeAngle(a.rope, a.entry_positions[e], i, &c, &s);
      const float x0 = r[2 * i], x1 = r[2 * i + 1];
      r[2 * i] = x0 * c - x1 * s;
      r[2 * i + 1] = x1 * c + x0 * s;
    }
    __syncthreads();
  }
  float* out = a.out_rows != nullptr ? a.out_rows + e * a.dim : RowAt(a.out, a.entry_slots[e]);
  for (int ch = threadIdx.x; ch < a.dim; ch += blockDim.x) out[ch] = entry[ch];
}

__global__ void FillKernel(float* x, int64_t count, float value) {
  detail::WaitForPrecedingKernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = value;
  }
}

}  // namespace

Status RopeTrailing(float* x, const int32_t* positions, int64_t tokens, int heads, int dim,
                    const TrailingRope& rope, cudaStream_t stream) {
  if (rope.rope_dim % 2 != 0 || rope.rope_dim > dim || rope.rope_dim < 0) {
    return InvalidArgumentError("deepseek rope: rope_dim " + std::to_string(rope.rope_dim) +
                                " must be even and at most the width " + std::to_string(dim));
  }
  if (tokens <= 0 || heads <= 0 || rope.rope_dim == 0) return Status::Ok();
  const int pairs = heads * (rope.rope_dim / 2);
  const int threads = std::min(kThreads, (pairs + 31) / 32 * 32);
  const size_t smem = sizeof(float) * rope.rope_dim;
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(RopeTrailingKernel,
                                                     static_cast<unsigned>(tokens), threads, smem,
                                                     stream, x, positions, heads, dim, rope));
  return Status::Ok();
}

Status WriteCacheRows(const float* rows, const int64_t* slots, int64_t tokens,
                      const CacheRows& field, cudaStream_t stream) {
  if (tokens <= 0 || field.width <= 0) return Status::Ok();
  const bool vec = field.width % 4 == 0 && RowsAligned(field) && detail::Aligned16(rows);
  const int64_t items = tokens * (vec ? field.width / 4 : field.width);
  SPARK_CUDA_RETURN_IF_ERROR(
      vec ? detail::LaunchDependent(WriteRowsKernel<4>, GridFor(items), kThreads, 0, stream, rows,
                                    slots, tokens, field)
          : detail::LaunchDependent(WriteRowsKernel<1>, GridFor(items), kThreads, 0, stream, rows,
                                    slots, tokens, field));
  return Status::Ok();
}

Status WriteCompressorRows(const CompressorRows& in, const int32_t* positions, const int64_t* slots,
                           int64_t tokens, cudaStream_t stream) {
  if (in.ape != nullptr && in.ratio <= 0) {
    return InvalidArgumentError("compressor inputs: ratio " + std::to_string(in.ratio) +
                                " must be positive with an ape table");
  }
  if (tokens <= 0 || in.width <= 0) return Status::Ok();
  // The vector path reads and writes every row four floats at a time: the fields and the
  // inputs must all allow it.
  const bool vec =
      in.width % 4 == 0 && RowsAligned(in.kv_field) && detail::Aligned16(in.kv) &&
      (in.gate == nullptr || (RowsAligned(in.gate_field) && detail::Aligned16(in.gate) &&
                              (in.ape == nullptr || detail::Aligned16(in.ape))));
  const int64_t items = tokens * (vec ? in.width / 4 : in.width);
  SPARK_CUDA_RETURN_IF_ERROR(
      vec ? detail::LaunchDependent(WriteCompressorRowsKernel<4>, GridFor(items), kThreads, 0,
                                    stream, in, positions, slots, tokens)
          : detail::LaunchDependent(WriteCompressorRowsKernel<1>, GridFor(items), kThreads, 0,
                                    stream, in, positions, slots, tokens));
  return Status::Ok();
}

Status PoolEntries(const PoolArgs& a, cudaStream_t stream) {
  if (a.dim <= 0 || a.pool <= 0 || (a.overlap && a.pool % 2 != 0)) {
    return InvalidArgumentError("compress: dim " + std::to_string(a.dim) + " and pool " +
                                std::to_string(a.pool) +
                                " must be positive (the pool even with overlap)");
  }
  if (a.rope.inv_freq != nullptr && (a.rope.rope_dim % 2 != 0 || a.rope.rope_dim > a.dim)) {
    return InvalidArgumentError("compress: rope_dim " + std::to_string(a.rope.rope_dim) +
                                " must be even and at most dim " + std::to_string(a.dim));
  }
  if (a.entries <= 0) return Status::Ok();
  if (a.entries > INT32_MAX) return InvalidArgumentError("compress: too many entries");
  const size_t smem = sizeof(float) * a.dim;
  if (smem > 48 * 1024) {
    return InvalidArgumentError("compress: dim " + std::to_string(a.dim) +
                                " exceeds the 12288 channels an entry block holds");
  }
  const int threads = std::min(kThreads, (a.dim + 31) / 32 * 32);
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      PoolEntriesKernel, static_cast<unsigned>(a.entries), threads, smem, stream, a));
  return Status::Ok();
}

Status FillFloat(float* x, int64_t count, float value, cudaStream_t stream) {
  if (count <= 0) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(
      detail::LaunchDependent(FillKernel, GridFor(count), kThreads, 0, stream, x, count, value));
  return Status::Ok();
}

}  // namespace spark::kernels
