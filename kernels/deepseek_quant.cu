// Fake quantisation kernels (deepseek_quant.h). Blocks of 32 or fewer channels (a power of two:
// the model's 16 and 32) take a thread per channel, the block's lanes finding its largest
// magnitude with shuffles; other block sizes a thread per block. The rounding reproduces the
// reference's integer steps (E4M3 by its binade's quantum, E2M1 by the reference's thresholds),
// not the hardware conversions, so both sides agree on every tie.
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/deepseek_quant.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace spark::kernels {
namespace {

constexpr int kThreads = 256;
constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

// 2^ceil(log2(t)) for a normal t > 0, from the bits (exponent field - 127, plus one when any
// mantissa bit is set).
__device__ __forceinline__ float Pow2Ceil(float t) {
  const uint32_t bits = __float_as_uint(t);
  const int k = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return ldexpf(1.0f, k);
}

// The E4M3 value nearest v (ties to even), saturating at +-448: v's binade quantum is 2^(e - 3)
// for normals, 2^-9 below 2^-6.
__device__ __forceinline__ float E4m3Round(float v) {
  if (isnan(v)) return v;
  const float a = fabsf(v);
  float r = kFp8Max;
  if (a < kFp8Max) {
    int e = 0;
    frexpf(a, &e);  // a = m * 2^e, m in [0.5, 1)
    const float quantum = ldexpf(1.0f, max(e - 1, -6) - 3);
    r = rintf(a / quantum) * quantum;
  }
  return signbit(v) ? -r : r;
}

// The E2M1 value nearest q in [-6, 6], ties to the even code (at 0.25, 1.25, 2.5 and 5 down, at
// 0.75, 1.75 and 3.5 up).
__device__ __forceinline__ float E2m1Round(float q) {
  const float m = fabsf(q);
  const int code = (m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) +
                   (m >= 3.5f) + (m > 5.0f);
  const float value = code < 5 ? 0.5f * code : (code == 5 ? 3.0f : (code == 6 ? 4.0f : 6.0f));
  return signbit(q) ? -value : value;
}

__device__ __forceinline__ float BlockScale(FakeQuantKind format, float amax) {
  switch (format) {
    case FakeQuantKind::kFp8Ue8m0:
      return Pow2Ceil(fmaxf(amax, 1e-4f) * (1.0f / kFp8Max));
    case FakeQuantKind::kFp4Ue8m0:
      return Pow2Ceil(fmaxf(amax, 6.0f * 0x1p-126f) * (1.0f / kFp4Max));
    case FakeQuantKind::kFp4E4m3:
      return E4m3Round(fmaxf(amax, 6.0f * 0x1p-9f) / kFp4Max);
  }
  return 1.0f;
}

__device__ __forceinline__ float Quantize(float x, float scale, FakeQuantKind format) {
  if (format == FakeQuantKind::kFp8Ue8m0) {
    return E4m3Round(fminf(fmaxf(x / scale, -kFp8Max), kFp8Max)) * scale;
  }
  return E2m1Round(fminf(fmaxf(x / scale, -kFp4Max), kFp4Max)) * scale;
}

// A thread per element; `block` (a power of two <= 32) consecutive lanes form a quantisation
// block. Warps walk the elements together (n_padded: n rounded up to 32).
__global__ void FakeQuantLanesKernel(float* x, int64_t n, int64_t n_padded, int block,
                                     FakeQuantKind format) {
  detail::WaitForPrecedingKernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_padded;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = i < n ? x[i] : 0.0f;
    float amax = fabsf(v);
    for (int offset = 1; offset < block; offset <<= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    if (i < n) x[i] = Quantize(v, BlockScale(format, amax), format);
  }
}

// A thread per quantisation block of any size.
__global__ void FakeQuantBlocksKernel(float* x, int64_t blocks, int block, FakeQuantKind format) {
  detail::WaitForPrecedingKernel();
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    float* v = x + b * block;
    float amax = 0.0f;
    for (int i = 0; i < block; ++i) amax = fmaxf(amax, fabsf(v[i]));
    const float scale = BlockScale(format, amax);
    for (int i = 0; i < block; ++i) v[i] = Quantize(v[i], scale, format);
  }
}

unsigned GridFor(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::CeilDiv(items, kThreads), 1, 65536));
}

}  // namespace

Status FakeQuantize(float* x, int64_t rows, int width, int block, FakeQuantKind format,
                    cudaStream_t stream) {
  if (block <= 0 || width % block != 0 || rows <= 0 || width <= 0) return Status::Ok();
  const int64_t n = rows * width;
  if (block <= 32 && (block & (block - 1)) == 0) {
    const int64_t padded = (n + 31) / 32 * 32;
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
        FakeQuantLanesKernel, GridFor(padded), kThreads, 0, stream, x, n, padded, block, format));
  } else {
    const int64_t blocks = n / block;
    SPARK_CUDA_RETURN_IF_ERROR(detail::LaunchDependent(
        FakeQuantBlocksKernel, GridFor(blocks), kThreads, 0, stream, x, blocks, block, format));
  }
  return Status::Ok();
}

}  // namespace spark::kernels
