#include "bench/engine/gpu_ceilings.h"

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"

namespace spark::engine::bench {

GpuCeilings MeasureGpuCeilings(bool fp8) {
  GpuCeilings c;
  cudaStream_t stream;
  Cuda(cudaStreamCreate(&stream), "stream");
  const size_t bytes = size_t{2} << 30;
  char *src = nullptr, *dst = nullptr;
  Cuda(cudaMalloc(&src, bytes), "malloc");
  Cuda(cudaMalloc(&dst, bytes), "malloc");
  Check(kernels::FillUniform(reinterpret_cast<float*>(src), bytes / 4, 3, -1.0f, 1.0f, stream),
        "fill");
  const double copy_ms = MedianMs(stream, 5, [&] {
    Cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  });
  c.copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  auto gemm = Take(kernels::Gemm::Create({}), "gemm");
  const int n = 8192;
  auto* x = reinterpret_cast<__nv_bfloat16*>(src);
  auto* w = reinterpret_cast<__nv_bfloat16*>(src + size_t{n} * n * 2);
  Check(kernels::FillUniform(x, size_t{n} * n * 2, 7, -1.0f, 1.0f, stream), "fill");
  const double bf16_ms = MedianMs(stream, 10, [&] {
    Check(gemm->Run(kernels::GemmType::kBF16, kernels::GemmType::kBF16, x, n, n, w, n, dst, stream),
          "bf16 gemm");
  });
  c.bf16_tflops = 2.0 * n * n * n / (bf16_ms * 1e-3) / 1e12;
  if (fp8 && gemm->SupportsFp8(n, n, n)) {
    auto* xq = reinterpret_cast<uint8_t*>(src);
    auto* wq = reinterpret_cast<uint8_t*>(src + size_t{n} * n);
    auto* xs = reinterpret_cast<float*>(src + size_t{2} * n * n);
    auto* ws = xs + size_t{n} * (n / 128);
    Check(kernels::FillFp8Uniform(xq, size_t{2} * n * n, 9, -1.0f, 1.0f, stream), "fill");
    Check(kernels::FillUniform(xs, size_t{n} * (n / 128) + size_t(n / 128) * (n / 128), 11, 0.5f,
                               1.0f, stream),
          "fill");
    const double fp8_ms = MedianMs(stream, 3, [&] {
      Check(gemm->RunFp8(xq, xs, n, n, wq, ws, n, reinterpret_cast<float*>(dst), stream),
            "fp8 gemm");
    });
    c.fp8_tflops = 2.0 * n * n * n / (fp8_ms * 1e-3) / 1e12;
  }
  gemm.reset();
  cudaFree(src);
  cudaFree(dst);
  cudaStreamDestroy(stream);
  return c;
}

}  // namespace spark::engine::bench
