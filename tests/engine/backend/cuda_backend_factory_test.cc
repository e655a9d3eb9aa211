// CreateBackend: names, and what "cuda" gives in this build and on this machine.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend/backend_factory.h"

namespace spark::engine::backend {
namespace {

TEST(BackendFactoryTest, CpuAlwaysExists) {
  auto b = CreateBackend({"cpu", 1, 0});
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ((*b)->name(), "cpu");
  const auto names = CompiledBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
}

TEST(BackendFactoryTest, UnknownNameListsTheChoices) {
  auto b = CreateBackend({"rocm", 1, 0});
  ASSERT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("cpu or cuda"), std::string::npos) << b.status().message();
}

// Without CUDA compiled in: FailedPrecondition that says how to get it. With it: a backend on
// a machine with a GPU, Unavailable naming the fix on one without.
TEST(BackendFactoryTest, CudaIsCreatedOrExplainsWhyNot) {
  auto b = CreateBackend({"cuda", 1, 0});
  const auto names = CompiledBackends();
  const bool compiled = std::find(names.begin(), names.end(), "cuda") != names.end();
  if (!compiled) {
    ASSERT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(b.status().message().find("SPARK_CUDA"), std::string::npos);
  } else if (b.ok()) {
    EXPECT_EQ((*b)->name(), "cuda");
  } else {
    EXPECT_EQ(b.status().code(), StatusCode::kUnavailable) << b.status().message();
    EXPECT_NE(b.status().message().find("--backend cpu"), std::string::npos);
  }
}

}  // namespace
}  // namespace spark::engine::backend
