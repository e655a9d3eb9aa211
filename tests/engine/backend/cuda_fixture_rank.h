// What the CUDA backend's engine-level tests over the committed fixtures share: one GPU rank of a
// fixture (backend, model and a step runner with decode graphs on).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "tests/engine/model/fixture_rank.h"

namespace spark::engine::model::fixture_testing {

struct GpuRank {
  std::unique_ptr<backend::cuda::CudaBackend> gpu;
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelStepRunner> runner;
};

// The fixture on a new CudaBackend; a variant directory (deepseek-v41-tiny/release) takes the
// fixture's tokenizer files. Null (with the failure recorded) when it does not load.
inline std::unique_ptr<GpuRank> LoadOnGpu(const std::string& fixture,
                                          ModelOptions options = {}) {
  auto r = std::make_unique<GpuRank>();
  auto gpu = backend::cuda::CudaBackend::Create({});
  EXPECT_TRUE(gpu.ok()) << gpu.status().message();
  if (!gpu.ok()) return nullptr;
  r->gpu = std::move(*gpu);
  options.tokenizer_dir = FixtureDir(fixture.substr(0, fixture.find('/')));
  auto model = LoadModel(FixtureDir(fixture), *r->gpu, nullptr, options);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return nullptr;
  r->model = std::move(*model);
  auto runner = ModelStepRunner::Create(r->model.get(), *r->gpu, kBlocks, kBlockSize,
                                        /*return_logits=*/true, /*decode_graphs=*/true);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return nullptr;
  r->runner = std::move(*runner);
  return r;
}

}  // namespace spark::engine::model::fixture_testing
