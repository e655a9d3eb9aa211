// The main of the GPU test binaries: applies the engine's environment (engine/config) before any
// test runs, so ctest entries that set SPARK_PDL=0 or SPARK_PREFILL_STAGES=1 reach the kernels the
// way they reach them in spark-engine.
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/config/environment.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const auto env = spark::engine::config::ReadEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 2;
  }
  spark::engine::config::ApplyKernelSettings(*env);
  return RUN_ALL_TESTS();
}
