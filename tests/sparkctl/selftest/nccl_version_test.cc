// NCCL.VERSION: the versions with a known aarch64 hang fail (2.28.9, 2.29.2: the proxy-op
// pool leak, fixed in 2.29.3), every aarch64 version warns about the unreleased send-path fence
// (NVIDIA/nccl #2393), x86_64 passes, a CPU engine needs no NCCL, and an unknown version warns.
#include "sparkctl/selftest/nccl_version.h"

#include <gtest/gtest.h>

namespace spark::selftest {
namespace {

using host::Verdict;

bench::NcclProbe Probe(int version, const std::string& arch = "aarch64") {
  bench::NcclProbe p;
  p.arch = arch;
  p.version = version;
  p.engine = "/usr/local/lib/sparkctl/spark-engine";
  p.engine_found = true;
  p.engine_links_nccl = true;
  p.library = "/usr/lib/aarch64-linux-gnu/libnccl.so.2";
  return p;
}

Verdict Worst(const std::vector<host::CheckResult>& checks) {
  Verdict worst = Verdict::kOk;
  for (const auto& c : checks) {
    EXPECT_EQ(c.id, "NCCL.VERSION");
    EXPECT_EQ(c.node, "spark-1");
    if (c.verdict == Verdict::kFail || (c.verdict == Verdict::kWarn && worst == Verdict::kOk)) {
      worst = c.verdict;
    }
  }
  return worst;
}

TEST(NcclVersionTest, TheProxyLeakVersionsFailOnAarch64) {
  for (int v : {22809, 22902}) {
    auto checks = NcclVersionChecks("spark-1", Probe(v));
    EXPECT_EQ(Worst(checks), Verdict::kFail) << v;
    EXPECT_NE(checks[0].seen.find("proxy-op pool leak"), std::string::npos) << checks[0].seen;
    EXPECT_NE(checks[0].hint.find("install NCCL 2.29.3 or later"), std::string::npos);
  }
}

TEST(NcclVersionTest, FixedOrEarlierVersionsOnlyWarnAboutTheUnreleasedFence) {
  for (int v : {22807, 22903, 23004}) {
    auto checks = NcclVersionChecks("spark-1", Probe(v));
    ASSERT_EQ(checks.size(), 1u) << v;
    EXPECT_EQ(checks[0].verdict, Verdict::kWarn) << v;
    EXPECT_NE(checks[0].seen.find("#2393"), std::string::npos) << checks[0].seen;
  }
}

TEST(NcclVersionTest, X86AndCpuEnginesPass) {
  auto x86 = NcclVersionChecks("spark-1", Probe(22809, "x86_64"));
  ASSERT_EQ(x86.size(), 1u);
  EXPECT_EQ(x86[0].verdict, Verdict::kOk);
  EXPECT_NE(x86[0].seen.find("NCCL 2.28.9"), std::string::npos) << x86[0].seen;
  bench::NcclProbe cpu = Probe(0);
  cpu.engine_links_nccl = false;
  cpu.note = cpu.engine + " does not load NCCL (a CPU build)";
  EXPECT_EQ(Worst(NcclVersionChecks("spark-1", cpu)), Verdict::kOk);
  bench::NcclProbe missing = Probe(0);
  missing.engine_found = false;
  missing.note = "no NCCL: libnccl.so.2: cannot open shared object file";
  EXPECT_EQ(Worst(NcclVersionChecks("spark-1", missing)), Verdict::kWarn);
}

}  // namespace
}  // namespace spark::selftest
