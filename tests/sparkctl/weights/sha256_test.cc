// SHA-256 against published test vectors and against coreutils sha256sum.
#include "sparkctl/weights/sha256.h"

#include <gtest/gtest.h>

#include "sparkctl/weights/parallel_hash.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using testing::RandomBytes;
using testing::ScratchDir;
using testing::Sha256sumOf;
using testing::WriteBytes;

TEST(Sha256Test, KnownVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, FileMatchesSha256sumAcrossBufferBoundaries) {
  ScratchDir dir;
  // Sizes around the (tiny) buffer to hit partial, exact and multiple reads.
  for (size_t size : {0u, 1u, 4095u, 4096u, 4097u, 1000003u}) {
    std::string path = dir / ("f" + std::to_string(size));
    WriteBytes(path, RandomBytes(size, static_cast<uint32_t>(size)));
    std::atomic<uint64_t> progress{0};
    auto digest = HashFile(path, {.buffer_bytes = 4096}, &progress);
    ASSERT_TRUE(digest.ok()) << digest.status().ToString();
    EXPECT_EQ(digest->sha256, Sha256sumOf(path)) << size;
    EXPECT_EQ(digest->bytes, size);
    EXPECT_EQ(progress.load(), size);
  }
}

TEST(Sha256Test, MissingFileIsNotFoundNamingIt) {
  auto digest = HashFile("/nonexistent/shard.safetensors", {});
  ASSERT_FALSE(digest.ok());
  EXPECT_EQ(digest.status().code(), StatusCode::kNotFound);
  EXPECT_NE(digest.status().message().find("/nonexistent/shard.safetensors"), std::string::npos);
}

TEST(Sha256Test, ParallelHashesEveryFileInJobOrder) {
  ScratchDir dir;
  std::vector<HashJob> jobs;
  uint64_t total = 0;
  for (int i = 0; i < 7; ++i) {
    size_t size = 100000u * static_cast<size_t>(i * 3 % 7 + 1);
    std::string path = dir / ("shard-" + std::to_string(i));
    WriteBytes(path, RandomBytes(size, static_cast<uint32_t>(i + 100)));
    jobs.push_back({path, size});
    total += size;
  }
  jobs.push_back({dir / "absent", 0});
  HashProgress progress;
  auto results = HashFilesParallel(jobs, 3, {.buffer_bytes = 65536}, &progress);
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t i = 0; i + 1 < jobs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
    EXPECT_EQ(results[i]->sha256, Sha256sumOf(jobs[i].path)) << jobs[i].path;
  }
  EXPECT_FALSE(results.back().ok());
  EXPECT_EQ(progress.bytes_done.load(), total);
  EXPECT_EQ(progress.files_done.load(), jobs.size());
}

}  // namespace
}  // namespace spark::weights
