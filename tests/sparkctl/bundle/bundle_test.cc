// MakeBundle / WriteBundle / LoadBundle on this build's programs; the written bundle checked with
// sha256sum and the dynamic loader (ldd), not with the code under test.
#include "sparkctl/bundle/bundle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/strings.h"
#include "tests/sparkctl/testing/shell.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;

const std::string kBin = SPARK_BINARY_DIR "/bin";

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bundle_test." + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<Bundle> MakeFromBuild() {
    MakeOptions o{.version = "9.9.9"};
    for (const char* p : kPrograms) o.programs[p] = kBin + "/" + p;
    return MakeBundle(o);
  }

  std::string dir_;
};

TEST_F(BundleTest, WrittenBundleRunsOnItsOwnLibraries) {
  auto b = MakeFromBuild();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->machine, HostMachine());
  EXPECT_EQ(b->version, "9.9.9");
  for (const char* p : kPrograms) EXPECT_TRUE(b->HasProgram(p)) << p;
  ASSERT_TRUE(WriteBundle(*b, dir_).ok());
  // sha256sum checks the manifest's hashes independently.
  std::string sums;
  for (const auto& f : b->files) sums += f.sha256 + "  " + f.path + "\n";
  std::ofstream(dir_ + "/SUMS") << sums;
  testing::Output check = testing::Shell("cd " + dir_ + " && sha256sum -c --quiet SUMS");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  // The loader takes every bundled library from the bundle, through $ORIGIN/../lib.
  for (const char* p : kPrograms) {
    testing::Output ldd = testing::Shell("ldd " + dir_ + "/bin/" + p);
    ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
    for (const auto& f : b->files) {
      if (!StartsWith(f.path, "lib/")) continue;
      const std::string soname = f.path.substr(4);
      const size_t at = ldd.out.find(soname + " => ");
      if (at == std::string::npos) continue;  // another program's library
      const std::string line = ldd.out.substr(at, ldd.out.find('\n', at) - at);
      EXPECT_NE(line.find(dir_ + "/bin/../lib/" + soname), std::string::npos) << p << ": " << line;
    }
  }
  testing::Output version = testing::Shell(dir_ + "/bin/sparkctl --version");
  EXPECT_EQ(version.exit_code, 0) << version.err;
}

TEST_F(BundleTest, LoadGivesTheSameIdAndCatchesDamage) {
  auto b = MakeFromBuild();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(WriteBundle(*b, dir_).ok());
  auto loaded = LoadBundle(dir_, /*verify=*/true);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->Id(), b->Id());
  EXPECT_EQ(loaded->ManifestText(), b->ManifestText());
  EXPECT_EQ(loaded->Find("bin/sparkctl")->source, dir_ + "/bin/sparkctl");
  // A flipped byte: only a verifying load notices.
  const std::string lib = dir_ + "/" + b->files.back().path;
  {
    std::fstream f(lib, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c;
    f.get(c);
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  EXPECT_TRUE(LoadBundle(dir_, false).ok());
  auto damaged = LoadBundle(dir_, true);
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find(lib), std::string::npos);
  // A truncated file: even a plain load notices.
  fs::resize_file(lib, 10);
  EXPECT_EQ(LoadBundle(dir_, false).status().code(), StatusCode::kDataLoss);
}

TEST_F(BundleTest, IdChangesWithAnyFile) {
  auto b = MakeFromBuild();
  ASSERT_TRUE(b.ok());
  Bundle other = *b;
  other.files[0].sha256[0] = other.files[0].sha256[0] == 'a' ? 'b' : 'a';
  EXPECT_NE(other.Id(), b->Id());
  Bundle renamed = *b;
  renamed.version = "9.9.10";
  EXPECT_NE(renamed.Id(), b->Id());
}

TEST_F(BundleTest, RefusesProgramsThatWouldNotFindTheBundledLibraries) {
  // Test binaries are linked without $ORIGIN/../lib.
  auto b = MakeBundle({.programs = {{"sparkctl", "/proc/self/exe"}}, .version = "1"});
  ASSERT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("$ORIGIN/../lib"), std::string::npos);
  auto unknown = MakeBundle({.programs = {{"bash", "/bin/bash"}}, .version = "1"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BundleTest, WriteRefusesANonEmptyFolder) {
  auto b = MakeFromBuild();
  ASSERT_TRUE(b.ok());
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/keep") << "x";
  EXPECT_EQ(WriteBundle(*b, dir_).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(dir_ + "/keep"));
}

TEST_F(BundleTest, ManifestParserRefusesUnsafeEntries) {
  auto b = MakeFromBuild();
  ASSERT_TRUE(b.ok());
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> damage;
  };
  std::vector<Case> cases = {
      {"schema", [](nlohmann::json& j) { j["schema"] = "sparkctl-bundle/v0"; }},
      {"is not bin/NAME", [](nlohmann::json& j) { j["files"][0]["path"] = "bin/../../etc/passwd"; }},
      {"is not bin/NAME", [](nlohmann::json& j) { j["files"][0]["path"] = "etc/passwd"; }},
      {"sha256", [](nlohmann::json& j) { j["files"][0]["sha256"] = "xyz"; }},
      {"malformed", [](nlohmann::json& j) { j.erase("machine"); }},
  };
  for (const Case& c : cases) {
    nlohmann::json j = nlohmann::json::parse(b->ManifestText());
    c.damage(j);
    auto parsed = BundleFromJson(j);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(parsed.status().message().find(c.what), std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace spark::bundle
