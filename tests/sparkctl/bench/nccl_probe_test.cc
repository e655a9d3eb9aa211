// spark-bench nccl-info: the NCCL a binary loads, found the way the dynamic loader finds it
// (its RUNPATH included), and that library's ncclGetVersion; here against a stand-in
// libnccl.so.2 and a stand-in engine linked to it, and a CPU-only binary that loads none.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "base/process.h"
#include "sparkctl/bench/nccl_probe.h"

namespace spark::bench {
namespace {

const std::string kBench = SPARK_BINARY_DIR "/bin/spark-bench";

NcclProbe NcclInfo(const std::string& args) {
  ProcessRunner runner;
  auto r = runner.Run({"/bin/sh", "-c", kBench + " nccl-info " + args});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  auto p = NcclProbeFromJson(nlohmann::json::parse(r->out));
  EXPECT_TRUE(p.ok()) << r->out;
  return p.ok() ? *p : NcclProbe{};
}

TEST(NcclProbeTest, TheEnginesOwnLibnccl) {
  const NcclProbe p = NcclInfo("--engine " SPARK_BINARY_DIR "/tests/fake_nccl_engine");
  EXPECT_TRUE(p.engine_found);
  EXPECT_TRUE(p.engine_links_nccl);
  EXPECT_EQ(p.version, 22809);
  EXPECT_EQ(p.VersionText(), "2.28.9");
  EXPECT_NE(p.library.find("tests/fake-nccl/libnccl.so.2"), std::string::npos) << p.library;
  EXPECT_FALSE(p.arch.empty());
}

TEST(NcclProbeTest, ACpuBuildLoadsNoNccl) {
  const NcclProbe p = NcclInfo("--engine /bin/true");
  EXPECT_TRUE(p.engine_found);
  EXPECT_FALSE(p.engine_links_nccl);
  EXPECT_EQ(p.version, 0);
  EXPECT_NE(p.note.find("does not load NCCL"), std::string::npos) << p.note;
}

TEST(NcclProbeTest, AnExplicitLibraryAndAMissingEngine) {
  const NcclProbe lib = NcclInfo("--library " SPARK_BINARY_DIR "/tests/fake-nccl/libnccl.so.2");
  EXPECT_EQ(lib.version, 22809);
  const NcclProbe missing = NcclInfo("--engine /nonexistent/spark-engine --library "
                                SPARK_BINARY_DIR "/tests/fake-nccl/libnccl.so.2");
  EXPECT_EQ(missing.version, 22809);
  auto bad = NcclProbeFromJson(nlohmann::json{{"arch", "x"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::bench
