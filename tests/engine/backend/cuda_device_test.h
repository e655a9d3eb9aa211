// The base of the CUDA op-test fixtures: a CudaBackend on device 0 (the test skipped without a
// CUDA device), synchronised after each test so that a kernel's failure lands in that test.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto b = CudaBackend::Create({});
    ASSERT_TRUE(b.ok()) << b.status().message();
    gpu_ = std::move(*b);
  }
  void TearDown() override {
    if (gpu_) {
      EXPECT_TRUE(gpu_->Synchronize().ok()) << gpu_->status().message();
    }
  }

  std::unique_ptr<CudaBackend> gpu_;
};

}  // namespace spark::engine::backend::cuda
