// The fixture of the CudaBackend op tests: a CudaBackend on device 0 (skipped without one)
// beside the CPU backend they are checked against, with upload, download and matrix helpers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "tests/engine/backend/cuda_device_test.h"
#include "engine/core/dtype.h"
#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {

// The bf16 elements held in float storage (two per float, as a bf16 cache's bytes download).
inline std::vector<float> WidenBf16(const std::vector<float>& storage) {
  std::vector<float> out(storage.size() * 2);
  const auto* bits = reinterpret_cast<const uint16_t*>(storage.data());
  for (size_t i = 0; i < out.size(); ++i) out[i] = core::Bf16ToFloat(bits[i]);
  return out;
}

class CudaBackendTest : public CudaDeviceTest {
 protected:
  Buffer Put(const std::vector<float>& host) {
    auto b = gpu_->Allocate(host.size());
    EXPECT_TRUE(b.ok());
    gpu_->Upload(host, b->data());
    return std::move(*b);
  }
  // `host` [rows, cols] as a `dtype` matrix in the CPU backend and on the GPU (fp8: the same
  // quantised bytes in both).
  void Matrices(const std::vector<float>& host, int64_t rows, int64_t cols, DType dtype,
                Buffer* on_cpu, Buffer* on_gpu) {
    auto c = cpu_.AllocateMatrix(rows, cols, dtype);
    auto g = gpu_->AllocateMatrix(rows, cols, dtype);
    ASSERT_TRUE(c.ok() && g.ok());
    cpu_.UploadMatrix(host, cols, *c);
    gpu_->UploadMatrix(host, cols, *g);
    *on_cpu = std::move(*c);
    *on_gpu = std::move(*g);
  }
  std::vector<float> Get(const Buffer& b) {
    std::vector<float> h(b.size());
    gpu_->Download(b.data(), h);
    return h;
  }

  void KvWriteAndPagedAttention(DType cache_type);

  cpu::CpuBackend cpu_{2};
};

}  // namespace spark::engine::backend::cuda
