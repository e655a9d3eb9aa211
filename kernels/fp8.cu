#include <cuda_fp8.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/elementwise.h"
#include "kernels/fp8.h"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

// One thread per 16 weights (one 16-byte load, two 16-byte stores).
__global__ void DequantFp8ToBf16Kernel(const uint8_t* __restrict__ w,
                                       const float* __restrict__ scales, int64_t n, int k,
                                       __nv_bfloat16* __restrict__ out) {
  detail::WaitForPrecedingKernel();
  const int chunks = k / 16, scale_cols = (k + kFp8Block - 1) / kFp8Block;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * chunks;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / chunks;
    const int c = static_cast<int>(i % chunks);
    const float s = scales[(r / kFp8Block) * scale_cols + c * 16 / kFp8Block];
    const uint4 packed = __ldg(reinterpret_cast<const uint4*>(w) + i);
    const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&packed);
    uint4 widened[2];
    auto* dst = reinterpret_cast<__nv_bfloat162*>(widened);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 f = detail::Fp8x2ToFloat2(pairs[j]);
      dst[j] = __floats2bfloat162_rn(f.x * s, f.y * s);
    }
    reinterpret_cast<uint4*>(out)[2 * i] = widened[0];
    reinterpret_cast<uint4*>(out)[2 * i + 1] = widened[1];
  }
}

// One warp per 1 x 128 block: four values per lane.
__global__ void QuantizeRowsFp8Kernel(const float* __restrict__ x, int64_t m, int k,
                                      uint8_t* __restrict__ out, float* __restrict__ scales,
                                      int64_t scale_rows) {
  detail::WaitForPrecedingKernel();
  const int lane = threadIdx.x % 32, blocks_per_row = k / kFp8Block;
  const int64_t block = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (block >= m * blocks_per_row) return;
  const int64_t r = block / blocks_per_row;
  const int kb = static_cast<int>(block % blocks_per_row);
  const int64_t at = r * k + int64_t{kb} * kFp8Block + 4 * lane;
  const float4 v = *reinterpret_cast<const float4*>(x + at);
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float scale = amax > 0.0f ? amax / kFp8Max : 1.0f;
  const __nv_fp8x2_storage_t lo =
      __nv_cvt_float2_to_fp8x2(make_float2(v.x / scale, v.y / scale), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t hi =
      __nv_cvt_float2_to_fp8x2(make_float2(v.z / scale, v.w / scale), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(out + at) = uint32_t{lo} | (uint32_t{hi} << 16);
  if (lane == 0) scales[int64_t{kb} * scale_rows + r] = scale;
}

}  // namespace

Status QuantizeRowsFp8(const float* x, int64_t m, int k, uint8_t* out, float* scales,
                       int64_t scale_rows, cudaStream_t stream) {
  if (k % kFp8Block != 0) {
    return InvalidArgumentError("fp8 activation quantisation: k must be a multiple of 128 (got " +
                                std::to_string(k) + ")");
  }
  const int64_t threads = m * (k / kFp8Block) * 32;
  if (threads == 0) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
      QuantizeRowsFp8Kernel, static_cast<unsigned>(detail::CeilDiv(threads, 256)), 256, 0, stream,
      x, m, k, out, scales, scale_rows));
  return Status::Ok();
}

Status DequantFp8ToBf16(const uint8_t* w, const float* scales, int64_t n, int k, __nv_bfloat16* out,
                        cudaStream_t stream) {
  if (k % 16 != 0) {
    return InvalidArgumentError("fp8 dequantisation: k must be a multiple of 16 (got " +
                                std::to_string(k) + ")");
  }
  const int64_t threads = n * (k / 16);
  if (threads == 0) return Status::Ok();
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>(detail::CeilDiv(threads, 256), 65535));
  SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(DequantFp8ToBf16Kernel, blocks, 256, 0, stream,
                                                     w, scales, n, k, out));
  return Status::Ok();
}

Status FillFp8Uniform(uint8_t* dst, size_t count, uint64_t seed, float lo, float hi,
                      cudaStream_t stream) {
  return FillUniform(reinterpret_cast<__nv_fp8_e4m3*>(dst), count, seed, lo, hi, stream);
}

}  // namespace spark::kernels
