// What the engine-level model tests over the committed fixtures share: where a fixture lives,
// the paged cache they run with, and one CPU rank of a fixture (model and step runner).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"

namespace spark::engine::model::fixture_testing {

constexpr int kBlockSize = 4, kBlocks = 96;

inline std::string FixtureDir(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

struct OneRank {
  backend::cpu::CpuBackend backend{1};
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelStepRunner> runner;
};

// The fixture on the CPU backend as rank options.shard.rank of `comm` (none: one rank); rank 0
// returns logits. Null (with the failure recorded) when it does not load.
inline std::unique_ptr<OneRank> Load(const std::string& fixture,
                                     comm::Communicator* comm = nullptr,
                                     ModelOptions options = {}) {
  auto r = std::make_unique<OneRank>();
  auto model = LoadModel(FixtureDir(fixture), r->backend, comm, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  r->model = std::move(*model);
  auto runner = ModelStepRunner::Create(r->model.get(), r->backend, kBlocks, kBlockSize,
                                        options.shard.rank == 0);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return nullptr;
  r->runner = std::move(*runner);
  return r;
}

}  // namespace spark::engine::model::fixture_testing
