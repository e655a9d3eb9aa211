// Node-side verify: every kind of damage is named precisely, the cache is used and invalidated
// correctly, and no file in the model directory is ever modified. The manifest under test is
// always built from `sha256sum` output (independent of the code under test).
#include "sparkctl/weights/manifest_verify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sparkctl/weights/create_manifest.h"
#include "sparkctl/weights/verify_cache.h"
#include "sparkctl/weights/verify_report.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: test helpers

constexpr int kShards = 4;
constexpr size_t kShardBytes = 300000;

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kShards; ++i) {
      WriteBytes(Shard(i), RandomBytes(kShardBytes + static_cast<size_t>(i), static_cast<uint32_t>(i)));
      AgeFile(Shard(i));  // older than the cache's racy window
    }
    WriteBytes(dir_ / "config.json", "{\"model_type\": \"qwen3\"}\n");
    AgeFile(dir_ / "config.json");
    manifest_ = ManifestFromSha256sum();
  }

  std::string Shard(int i) const {
    return dir_ / ("model-0000" + std::to_string(i + 1) + "-of-0000" + std::to_string(kShards) +
                   ".safetensors");
  }
  static std::string Rel(const std::string& path) { return path.substr(path.rfind('/') + 1); }

  // SHA256SUMS from coreutils, sizes from stat: the expected values never come from our code.
  Manifest ManifestFromSha256sum() {
    std::string sums = RunShell("cd " + ShellQuote(dir_.path()) + " && sha256sum *");
    auto parsed = ParseSha256Sums(sums, "sha256sum output");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    Manifest m = *parsed;
    m.repository = "acme/tiny";
    m.revision = "r1";
    for (ManifestEntry& e : m.files) {
      e.size = std::stoull(RunShell("stat -c %s " + ShellQuote(dir_ / e.path)));
    }
    return m;
  }

  VerifyReport Verify(bool use_cache = true) {
    VerifyOptions options{.dir = dir_.path(), .use_cache = use_cache, .threads = 2};
    options.progress.enabled = false;
    auto report = VerifyDirectory(manifest_, options);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? *report : VerifyReport{};
  }

  static const FileCheck& Find(const VerifyReport& report, const std::string& rel) {
    for (const FileCheck& f : report.files) {
      if (f.path == rel) return f;
    }
    static FileCheck none{.path = "(not in report)"};
    ADD_FAILURE() << rel << " not in report";
    return none;
  }

  // Hashes of every file, by sha256sum, to prove verify changed nothing.
  std::string Snapshot() { return RunShell("cd " + ShellQuote(dir_.path()) + " && sha256sum *"); }

  ScratchDir dir_;
  Manifest manifest_;
};

TEST_F(VerifyTest, IntactCopyIsOk) {
  VerifyReport r = Verify();
  EXPECT_TRUE(r.ok()) << FormatVerifyReportText(r);
  EXPECT_EQ(r.Count(FileState::kOk), static_cast<size_t>(kShards + 1));
  EXPECT_GT(r.bytes_hashed, kShards * kShardBytes);
  EXPECT_EQ(r.bytes_cached, 0u);
}

TEST_F(VerifyTest, TruncatedShardIsSizeMismatch) {
  std::string before = ReadBytes(Shard(1));
  ASSERT_EQ(::truncate(Shard(1).c_str(), 1000), 0);
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  const FileCheck& f = Find(r, Rel(Shard(1)));
  EXPECT_EQ(f.state, FileState::kSizeMismatch);
  EXPECT_EQ(f.actual_size, 1000u);
  EXPECT_THAT(f.detail, HasSubstr("size 1000 bytes but the manifest says 300001"));
  EXPECT_EQ(r.Count(FileState::kOk), static_cast<size_t>(kShards));
}

TEST_F(VerifyTest, FlippedByteIsHashMismatchAndFileIsUntouched) {
  std::string content = ReadBytes(Shard(2));
  content[content.size() / 2] ^= 0x01;
  WriteBytes(Shard(2), content);
  std::string snapshot = Snapshot();
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  const FileCheck& f = Find(r, Rel(Shard(2)));
  EXPECT_EQ(f.state, FileState::kHashMismatch);
  EXPECT_EQ(f.actual_sha256, Sha256sumOf(Shard(2)));
  EXPECT_THAT(f.detail, HasSubstr("corrupt"));
  EXPECT_EQ(Snapshot(), snapshot);  // verify never modifies the files
  // A second run still reports it (the cache keeps the actual hash, not a verdict).
  EXPECT_EQ(Find(Verify(), Rel(Shard(2))).state, FileState::kHashMismatch);
}

TEST_F(VerifyTest, MissingShard) {
  ASSERT_EQ(::unlink(Shard(0).c_str()), 0);
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  const FileCheck& f = Find(r, Rel(Shard(0)));
  EXPECT_EQ(f.state, FileState::kMissing);
  EXPECT_FALSE(f.actual_size.has_value());
  EXPECT_THAT(f.detail, HasSubstr("missing"));
}

TEST_F(VerifyTest, ExtraFileIsReported) {
  WriteBytes(dir_ / "stray/notes.txt", "x");
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.ok(/*allow_extra=*/true));
  const FileCheck& f = Find(r, "stray/notes.txt");
  EXPECT_EQ(f.state, FileState::kExtra);
  EXPECT_THAT(f.detail, HasSubstr("not in the manifest"));
  // The cache file written by the first run is never an extra.
  EXPECT_EQ(Verify().Count(FileState::kExtra), 1u);
}

TEST_F(VerifyTest, WrongManifestFailsEveryFile) {
  ScratchDir other;
  WriteBytes(other / "weights.bin", RandomBytes(1000, 99));
  Manifest wrong{.repository = "acme/other", .revision = "r9",
                 .files = {{"weights.bin", 1000, Sha256sumOf(other / "weights.bin")},
                           {"config.json", 24, Sha256sumOf(other / "weights.bin")}}};
  manifest_ = wrong;
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Find(r, "weights.bin").state, FileState::kMissing);
  EXPECT_EQ(Find(r, "config.json").state, FileState::kHashMismatch);
  EXPECT_EQ(r.Count(FileState::kExtra), static_cast<size_t>(kShards));
}

TEST_F(VerifyTest, MissingDirectoryIsAnError) {
  VerifyOptions options{.dir = dir_ / "nope"};
  options.progress.enabled = false;
  auto r = VerifyDirectory(manifest_, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr(dir_ / "nope"));
}

// A manifest without files would "verify" any directory: it is refused, naming the file.
TEST_F(VerifyTest, EmptyManifestIsRefused) {
  Manifest empty;
  empty.repository = "acme/tiny";
  empty.revision = "r1";
  VerifyOptions options{.dir = dir_.path(), .manifest_path = "empty.json"};
  options.progress.enabled = false;
  auto r = VerifyDirectory(empty, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("empty.json lists no files"));
}

TEST_F(VerifyTest, SecondRunComesFromCache) {
  VerifyReport first = Verify();
  ASSERT_TRUE(first.ok());
  VerifyReport second = Verify();
  EXPECT_TRUE(second.ok()) << FormatVerifyReportText(second);
  EXPECT_EQ(second.bytes_hashed, 0u);
  EXPECT_EQ(second.bytes_cached, first.bytes_hashed);
  for (const FileCheck& f : second.files) EXPECT_TRUE(f.from_cache) << f.path;
}

TEST_F(VerifyTest, TouchInvalidatesCacheEntry) {
  Verify();
  ASSERT_EQ(::utimensat(AT_FDCWD, Shard(3).c_str(), nullptr, 0), 0);  // touch
  VerifyReport r = Verify();
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(Find(r, Rel(Shard(3))).from_cache);
  EXPECT_TRUE(Find(r, Rel(Shard(0))).from_cache);
  EXPECT_EQ(r.bytes_hashed, kShardBytes + 3);
}

TEST_F(VerifyTest, SameSizeRewriteWithRestoredMtimeIsCaught) {
  Verify();
  struct timespec old_mtime = MtimeOf(Shard(1));
  WriteBytes(Shard(1), RandomBytes(kShardBytes + 1, 12345));  // same size, other content
  SetMtime(Shard(1), old_mtime);                              // like rsync -t / touch -r
  VerifyReport r = Verify();
  EXPECT_FALSE(r.ok());
  const FileCheck& f = Find(r, Rel(Shard(1)));
  EXPECT_FALSE(f.from_cache);
  EXPECT_EQ(f.state, FileState::kHashMismatch);
  EXPECT_EQ(f.actual_sha256, Sha256sumOf(Shard(1)));
}

TEST_F(VerifyTest, SameSizeRewriteIsCaught) {
  Verify();
  WriteBytes(Shard(0), RandomBytes(kShardBytes, 777));
  EXPECT_EQ(Find(Verify(), Rel(Shard(0))).state, FileState::kHashMismatch);
}

TEST_F(VerifyTest, FreshFilesAreNotTrustedFromCache) {
  WriteBytes(Shard(0), RandomBytes(kShardBytes, 0));  // same content, mtime now: racy
  Verify();
  EXPECT_FALSE(Find(Verify(), Rel(Shard(0))).from_cache);
}

TEST_F(VerifyTest, CorruptCacheIsIgnoredAndRewritten) {
  Verify();
  WriteBytes(dir_ / std::string(kVerifyCacheName), "{ not json");
  VerifyReport r = Verify();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.bytes_cached, 0u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("corrupt"));
  EXPECT_TRUE(Verify().warnings.empty());
}

TEST_F(VerifyTest, NoCacheOptionReadsEverything) {
  Verify();
  EXPECT_EQ(Verify(/*use_cache=*/false).bytes_cached, 0u);
}

TEST_F(VerifyTest, ReportJsonRoundTrip) {
  ASSERT_EQ(::unlink(Shard(0).c_str()), 0);
  WriteBytes(dir_ / "extra.bin", "e");
  VerifyReport r = Verify();
  std::string json = FormatVerifyReportJson(r);
  auto back = ParseVerifyReportJson(json, "node-1: stdout");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node, r.node);
  ASSERT_EQ(back->files.size(), r.files.size());
  for (size_t i = 0; i < r.files.size(); ++i) {
    EXPECT_EQ(back->files[i].path, r.files[i].path);
    EXPECT_EQ(back->files[i].state, r.files[i].state);
    EXPECT_EQ(back->files[i].actual_size, r.files[i].actual_size);
    EXPECT_EQ(back->files[i].actual_sha256, r.files[i].actual_sha256);
  }
  EXPECT_EQ(FormatVerifyReportJson(*back), json);
  auto bad = ParseVerifyReportJson("{\"schema\": \"sparkctl-weights-verify/v9\"}", "node-2: stdout");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("node-2: stdout"));
}

TEST_F(VerifyTest, CreatedManifestMatchesSha256sum) {
  CreateManifestOptions options{.dir = dir_.path(), .repository = "acme/tiny", .revision = "r1",
                                .threads = 2};
  options.progress.enabled = false;
  auto created = CreateManifest(options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_EQ(created->files.size(), manifest_.files.size());
  for (size_t i = 0; i < manifest_.files.size(); ++i) {
    EXPECT_EQ(created->files[i].path, manifest_.files[i].path);
    EXPECT_EQ(created->files[i].size, manifest_.files[i].size);
    EXPECT_EQ(created->files[i].sha256, manifest_.files[i].sha256);
  }
  // The cache it left makes the following verify instant.
  EXPECT_EQ(Verify().bytes_hashed, 0u);
}

TEST(VerifyCacheTest, RacyEntriesAreNotTrusted) {
  VerifyCache cache;
  int64_t now = WallClockNs();
  FileIdentity fresh{.device = 1, .inode = 2, .size = 3, .mtime_ns = now - 1'000'000'000};
  FileIdentity old = fresh;
  old.mtime_ns = now - 60'000'000'000;
  cache.Store("fresh", fresh, std::string(64, 'a'), now);
  cache.Store("old", old, std::string(64, 'b'), now);
  EXPECT_FALSE(cache.Lookup("fresh", fresh).has_value());
  EXPECT_EQ(cache.Lookup("old", old), std::string(64, 'b'));
  FileIdentity moved = old;
  moved.inode = 9;
  EXPECT_FALSE(cache.Lookup("old", moved).has_value());
}

TEST(ProgressTest, LineShowsBytesRateEtaAndFiles) {
  std::string line = FormatProgressLine("verify", 1ull << 30, 4ull << 30, 1, 4, 2.0);
  EXPECT_EQ(line, "verify: 1.00 GiB / 4.00 GiB (25.0%)  512.0 MiB/s  ETA 6s  files 1/4");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(133), "2m13s");
}

}  // namespace
}  // namespace spark::weights
