// Disk full while writing a manifest or the verify cache: the write fails with an error naming
// the file, the previous file survives byte for byte, and no temp file is left behind. Needs
// root to mount a small tmpfs; skipped otherwise.
#include <sys/mount.h>

#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/manifest_verify.h"
#include "sparkctl/weights/verify_cache.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: test helpers

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
    if (::mount("tmpfs", small_.path().c_str(), "tmpfs", 0, "size=256k,mode=0755") != 0) {
      GTEST_SKIP() << "cannot mount tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(small_.path().c_str(), MNT_DETACH);
  }

  // Fills the tmpfs until writes fail with ENOSPC.
  void FillDisk() {
    int code = 0;
    RunShell("dd if=/dev/zero of=" + ShellQuote(small_ / "filler") + " bs=4096 2>/dev/null", &code);
    ASSERT_NE(code, 0) << "dd should have hit ENOSPC";
  }

  std::string Listing() { return RunShell("ls -A " + ShellQuote(small_.path())); }

  static Manifest BigManifest(int entries) {
    Manifest m{.repository = "acme/tiny", .revision = "r1"};
    for (int i = 0; i < entries; ++i) {
      m.files.push_back({"shard-" + std::to_string(i) + ".safetensors", 1000u, std::string(64, 'c')});
    }
    return m;
  }

  ScratchDir small_;
  bool mounted_ = false;
};

TEST_F(DiskFullTest, ManifestWriteFailsAndKeepsOldFile) {
  std::string path = small_ / "r1.json";
  ASSERT_TRUE(WriteManifestFile(path, BigManifest(2), ManifestFormat::kJson).ok());
  std::string old_content = ReadBytes(path);
  FillDisk();
  Status s = WriteManifestFile(path, BigManifest(5000), ManifestFormat::kJson);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
  EXPECT_THAT(s.message(), HasSubstr("left unchanged"));
  EXPECT_EQ(ReadBytes(path), old_content);
  EXPECT_EQ(Listing(), "filler\nr1.json\n");  // no temp file left
  EXPECT_TRUE(ReadManifestFile(path).ok());
}

TEST_F(DiskFullTest, CacheWriteFailureKeepsVerdictAndOldCache) {
  ScratchDir model;
  WriteBytes(model / "a.bin", RandomBytes(50000, 1));
  WriteBytes(model / "b.bin", RandomBytes(50000, 2));
  AgeFile(model / "a.bin");
  AgeFile(model / "b.bin");
  Manifest m{.repository = "acme/tiny", .revision = "r1",
             .files = {{"a.bin", 50000u, Sha256sumOf(model / "a.bin")},
                       {"b.bin", 50000u, Sha256sumOf(model / "b.bin")}}};
  VerifyOptions options{.dir = model.path(), .cache_path = small_ / "cache.json", .threads = 2};
  options.progress.enabled = false;
  auto first = VerifyDirectory(m, options);
  ASSERT_TRUE(first.ok() && first->ok() && first->warnings.empty());
  std::string old_cache = ReadBytes(small_ / "cache.json");

  ASSERT_EQ(::utimensat(AT_FDCWD, (model / "b.bin").c_str(), nullptr, 0), 0);  // dirties cache
  FillDisk();
  auto second = VerifyDirectory(m, options);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->ok());  // the verdict does not depend on the cache write
  ASSERT_EQ(second->warnings.size(), 1u);
  EXPECT_THAT(second->warnings[0], HasSubstr(small_ / "cache.json"));
  EXPECT_THAT(second->warnings[0], HasSubstr("No space left on device"));
  EXPECT_EQ(ReadBytes(small_ / "cache.json"), old_cache);
  EXPECT_EQ(Listing(), "cache.json\nfiller\n");
  std::string warning;
  VerifyCache::Load(small_ / "cache.json", &warning);
  EXPECT_EQ(warning, "");
}

}  // namespace
}  // namespace spark::weights
