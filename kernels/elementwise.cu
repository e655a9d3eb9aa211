// Residual add, dtype conversions and the column split: grid-stride loops.
#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/elementwise.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

template <typename T>
__global__ void AddKernel(T* x, const T* __restrict__ y, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    x[i] = detail::FromFloat<T>(detail::ToFloat(x[i]) + detail::ToFloat(y[i]));
  }
}

template <typename From, typename To>
__global__ void CastKernel(const From* __restrict__ src, size_t count, To* __restrict__ dst) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = detail::FromFloat<To>(detail::ToFloat(src[i]));
  }
}

template <typename T>
__global__ void FillUniformKernel(T* dst, size_t count, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    dst[i] = detail::FromFloat<T>(lo + (hi - lo) * u);
  }
}

// One thread per element of src; the part found with constant indices (no stack copy of the
// parameters).
__global__ void SplitColumnsKernel(const float* __restrict__ src, int64_t rows, int total,
                                   ColumnParts parts) {
  detail::WaitForPrecedingKernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / total;
    int c = static_cast<int>(i % total);
    float* out = parts.out[0];
    int n = parts.n[0];
#pragma unroll
    for (int p = 1; p < kMaxColumnParts; ++p) {
      if (p < parts.count && c >= n) {
        c -= n;
        out = parts.out[p];
        n = parts.n[p];
      }
    }
    out[r * n + c] = src[i];
  }
}

unsigned Blocks(size_t count) { return std::min<unsigned>(detail::CeilDiv(count, 256), 1u << 20); }

}  // namespace

template <typename T>
Status Add(T* x, const T* y, size_t count, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  AddKernel<T><<<Blocks(count), 256, 0, stream>>>(x, y, count);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template <typename T>
Status FillUniform(T* dst, size_t count, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  FillUniformKernel<T><<<Blocks(count), 256, 0, stream>>>(dst, count, seed, lo, hi);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template Status FillUniform<float>(float*, size_t, uint64_t, float, float, cudaStream_t);
template Status FillUniform<__nv_bfloat16>(__nv_bfloat16*, size_t, uint64_t, float, float,
                                           cudaStream_t);
template Status FillUniform<__nv_fp8_e4m3>(__nv_fp8_e4m3*, size_t, uint64_t, float, float,
                                           cudaStream_t);
template Status Add<float>(float*, const float*, size_t, cudaStream_t);
template Status Add<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, size_t, cudaStream_t);

Status SplitColumns(const float* src, int64_t rows, const ColumnParts& parts, cudaStream_t stream) {
  if (parts.count < 1 || parts.count > kMaxColumnParts) {
    return InvalidArgumentError("split columns: 1.." + std::to_string(kMaxColumnParts) +
                                " parts (got " + std::to_string(parts.count) + ")");
  }
  int total = 0;
  for (int p = 0; p < parts.count; ++p) total += parts.n[p];
  if (rows <= 0 || total <= 0) return Status::Ok();
  const size_t count = static_cast<size_t>(rows) * total;
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(SplitColumnsKernel, Blocks(count), 256, 0,
                                                     stream, src, rows, total, parts));
  return Status::Ok();
}

Status CastF32ToBf16(const float* src, size_t count, __nv_bfloat16* dst, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  CastKernel<float, __nv_bfloat16><<<Blocks(count), 256, 0, stream>>>(src, count, dst);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status CastBf16ToF32(const __nv_bfloat16* src, size_t count, float* dst, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  CastKernel<__nv_bfloat16, float><<<Blocks(count), 256, 0, stream>>>(src, count, dst);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace spark::kernels
