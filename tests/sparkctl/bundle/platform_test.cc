#include "sparkctl/bundle/platform.h"

#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/sparkctl/testing/shell.h"

namespace spark::bundle {
namespace {

// What the probe prints on a DGX Spark (DGX OS 7).
constexpr char kSparkProbe[] =
    "machine=aarch64\nglibc=glibc 2.39\nos_id=ubuntu\nos_version=24.04\n"
    "os_name=Ubuntu 24.04.3 LTS\nlibrary=libstdc++.so.6\nlibrary=libibverbs.so.1\n"
    "library=librdmacm.so.1\nlibrary=libcuda.so.1\nlibrary=libnvidia-ml.so.1\n"
    "glibcxx=GLIBCXX_3.4.33\n";

Bundle Needing(const std::string& machine, const std::string& glibc, const std::string& glibcxx,
               std::map<std::string, std::string> node_libraries) {
  Bundle b;
  b.machine = machine;
  b.version = "1";
  b.needs = {glibc, "bin/sparkctl", glibcxx, "bin/spark-engine", std::move(node_libraries)};
  b.files = {{"bin/sparkctl", std::string(64, 'a'), 10, 0755, ""}};
  return b;
}

TEST(PlatformTest, ParsesTheProbeOfASpark) {
  auto p = ParsePlatform("spark-1", kSparkProbe);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->machine, "aarch64");
  EXPECT_EQ(p->glibc, "2.39");
  EXPECT_EQ(p->glibcxx, "3.4.33");
  EXPECT_EQ(p->os_id, "ubuntu");
  EXPECT_EQ(p->os_version, "24.04");
  EXPECT_EQ(p->Describe(), "aarch64, Ubuntu 24.04.3 LTS, glibc 2.39");
  EXPECT_TRUE(p->HasLibrary("libibverbs.so.1"));
  EXPECT_EQ(ParsePlatform("spark-1", "glibc=glibc 2.39\n").status().code(),
            StatusCode::kInvalidArgument);
  auto arm64 = ParsePlatform("n", "machine=arm64\n");
  ASSERT_TRUE(arm64.ok());
  EXPECT_EQ(arm64->machine, "aarch64");
}

// The probe script run by /bin/sh here, against what this process knows about itself.
TEST(PlatformTest, ProbeScriptReadsThisMachine) {
  testing::Output o = testing::Shell(PlatformProbeScript());
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto p = ParsePlatform("localhost", o.out);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->machine, HostMachine());
  EXPECT_EQ(p->glibc, gnu_get_libc_version());
  EXPECT_TRUE(p->HasLibrary("libstdc++.so.6"));
  EXPECT_FALSE(p->glibcxx.empty());
  std::ifstream release("/etc/os-release");
  std::string text((std::istreambuf_iterator<char>(release)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ID=" + p->os_id + "\n"), std::string::npos) << p->os_id;
  EXPECT_FALSE(p->os_name.empty());
}

TEST(PlatformTest, SaysWhyABundleCannotRunAndWhatToDo) {
  const NodePlatform spark = *ParsePlatform("spark-1", kSparkProbe);
  NodePlatform old = spark;
  old.glibc = "2.31";
  old.glibcxx = "3.4.28";
  NodePlatform bare = spark;
  bare.libraries = {"libstdc++.so.6"};
  NodePlatform musl = spark;
  musl.glibc = "";
  const std::map<std::string, std::string> rdma = {{"libibverbs.so.1", "rdma-core"},
                                                   {"libc.so.6", "glibc"}};
  struct Case {
    const char* name;
    Bundle bundle;
    NodePlatform platform;
    std::vector<std::string> says;  // empty: runnable
  };
  std::vector<Case> cases = {
      {"debian 12 build on DGX OS", Needing("aarch64", "2.34", "3.4.30", rdma), spark, {}},
      {"no glibc needs", Needing("aarch64", "", "", {}), musl, {}},
      {"other machine", Needing("x86_64", "2.34", "3.4.30", {}), spark,
       {"cannot run the x86_64 programs", "use a bundle made for aarch64"}},
      {"old glibc", Needing("aarch64", "2.34", "", {}), old,
       {"glibc 2.31 is older than 2.34", "bin/sparkctl", "not newer than 2.31"}},
      {"old libstdc++", Needing("aarch64", "", "3.4.30", {}), old,
       {"GLIBCXX 3.4.28, older than 3.4.30", "bin/spark-engine"}},
      {"no rdma-core", Needing("aarch64", "2.34", "", rdma), bare,
       {"no libibverbs.so.1", "rdma-core", "apt install"}},
      {"not glibc", Needing("aarch64", "2.34", "", {}), musl, {"not glibc or is unknown"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Status s = CheckRunnable(c.bundle, c.platform, "spark-1");
    if (c.says.empty()) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("spark-1 (aarch64, Ubuntu 24.04.3 LTS"), std::string::npos)
        << s.message();
    for (const std::string& part : c.says) {
      EXPECT_NE(s.message().find(part), std::string::npos) << part << " in: " << s.message();
    }
  }
}

TEST(PlatformTest, JsonRoundTrip) {
  const NodePlatform spark = *ParsePlatform("spark-1", kSparkProbe);
  auto back = PlatformFromJson(nlohmann::json::parse(PlatformToJson(spark).dump()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Describe(), spark.Describe());
  EXPECT_EQ(back->libraries, spark.libraries);
  EXPECT_EQ(back->glibcxx, spark.glibcxx);
  EXPECT_EQ(PlatformFromJson(nlohmann::json::object()).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spark::bundle
