#include "engine/config/environment.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace spark::engine::config {
namespace {

class EnvironmentTest : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void TearDown() override { SetUp(); }
  static constexpr const char* kNames[] = {"SPARK_LOG_LEVEL", "SPARK_PDL", "SPARK_PREFILL_STAGES",
                                           "SPARK_GEMM_TUNE_LOG", "SPARK_GEMV_MAX_ROWS"};
};

TEST_F(EnvironmentTest, DefaultsWhenUnset) {
  const Result<Environment> env = ReadEnvironment();
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_FALSE(env->log_level.has_value());
  EXPECT_TRUE(env->dependent_launch);
  EXPECT_EQ(env->prefill_stages, 0);
  EXPECT_FALSE(env->log_gemm_tuning);
  EXPECT_EQ(env->gemv_max_rows, 1);
}

TEST_F(EnvironmentTest, ReadsEveryVariable) {
  setenv("SPARK_LOG_LEVEL", "debug", 1);
  setenv("SPARK_PDL", "0", 1);
  setenv("SPARK_PREFILL_STAGES", "1", 1);
  setenv("SPARK_GEMM_TUNE_LOG", "1", 1);
  setenv("SPARK_GEMV_MAX_ROWS", "4", 1);
  const Result<Environment> env = ReadEnvironment();
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->log_level, "debug");
  EXPECT_FALSE(env->dependent_launch);
  EXPECT_EQ(env->prefill_stages, 1);
  EXPECT_TRUE(env->log_gemm_tuning);
  EXPECT_EQ(env->gemv_max_rows, 4);
}

TEST_F(EnvironmentTest, RefusesValuesItDoesNotKnowByName) {
  for (auto [name, value] : {std::pair{"SPARK_PDL", "no"}, {"SPARK_PREFILL_STAGES", "3"},
                             {"SPARK_GEMM_TUNE_LOG", "yes"}, {"SPARK_GEMV_MAX_ROWS", "0"},
                             {"SPARK_GEMV_MAX_ROWS", "5"}}) {
    SetUp();
    setenv(name, value, 1);
    const Result<Environment> env = ReadEnvironment();
    ASSERT_FALSE(env.ok()) << name;
    EXPECT_NE(env.status().message().find(name), std::string::npos) << env.status().message();
    EXPECT_NE(env.status().message().find(value), std::string::npos) << env.status().message();
  }
}

}  // namespace
}  // namespace spark::engine::config
