// EngramTable (engine/model/deepseek_v41/weights.h) over a table file mapped as the loader maps
// a checkpoint: Prefetch has the kernel read the pages of the rows asked for (and their scales),
// and no others; Gather after it returns the same rows.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/deepseek_v41/weights.h"

namespace spark::engine::model::dsv41 {
namespace {

constexpr int kDim = 64;  // F8_E4M3 row of 64 bytes, 2 E8M0 scales

// A file of `rows` table rows followed by their scales, mapped read-only with MADV_RANDOM (as
// the loader maps checkpoints), with its pages dropped from the page cache.
class MappedTable {
 public:
  explicit MappedTable(int64_t rows) : rows_(rows) {
    // On disk, next to the tests' build output: the page cache of tmpfs cannot be dropped.
    path_ = std::string(SPARK_BINARY_DIR) + "/engram_table_test_" + std::to_string(getpid());
    std::vector<uint8_t> bytes(rows * kDim + rows * 2);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 37) % 120);
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    fd_ = open(path_.c_str(), O_RDONLY);
    size_ = bytes.size();
    fsync(fd_);
    posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
    map_ = static_cast<uint8_t*>(mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0));
    madvise(map_, size_, MADV_RANDOM);
    weight_ = {"w", "F8_E4M3", 1, {rows, kDim}, {map_, static_cast<size_t>(rows * kDim)}, path_};
    scale_ = {"s", "F8_E8M0", 1, {rows, 2}, {map_ + rows * kDim, static_cast<size_t>(rows * 2)},
              path_};
  }
  ~MappedTable() {
    munmap(map_, size_);
    close(fd_);
    std::filesystem::remove(path_);
  }
  EngramTable table() const { return {&weight_, &scale_, core::DType::kF8E4M3, rows_, kDim}; }
  // Whether the page holding byte `offset` of the file is in the page cache.
  bool Resident(size_t offset) const {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    unsigned char in = 0;
    mincore(map_ + offset / page * page, page, &in);
    return (in & 1) != 0;
  }
  size_t size() const { return size_; }

 private:
  int64_t rows_;
  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
  uint8_t* map_ = nullptr;
  dsv4::RawTensor weight_, scale_;
};

TEST(EngramTableTest, PrefetchReadsTheRowsPagesAndNoOthers) {
  const int64_t rows = 64 * 256;  // 256 pages of 4 KiB rows, then 8 pages of scales
  MappedTable file(rows);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bool any = false;
  for (size_t at = 0; at < file.size(); at += page) any |= file.Resident(at);
  if (any) GTEST_SKIP() << "this filesystem keeps the file's pages cached: nothing to observe";
  const EngramTable table = file.table();
  const std::vector<int64_t> ids = {3 * 64 + 5, 200 * 64 + 63, 200 * 64 + 1};
  // Two pages of rows (the last two ids share one) and two of scales (2 bytes a row).
  EXPECT_EQ(table.Prefetch(ids), 4);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto asked = [&] {
    return file.Resident(ids[0] * kDim) && file.Resident(ids[1] * kDim) &&
           file.Resident(rows * kDim + ids[0] * 2) && file.Resident(rows * kDim + ids[1] * 2);
  };
  while (!asked() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(asked()) << "the rows' pages were not read within 5 s";
  for (const size_t p : {0, 4, 100, 199, 201, 255}) {
    EXPECT_FALSE(file.Resident(p * page)) << "page " << p << " holds no row asked for";
  }
  // The rows read after the prefetch are the file's.
  std::vector<float> out(ids.size() * kDim);
  table.Gather(ids, out.data());
  std::vector<float> again(out.size());
  for (size_t i = 0; i < ids.size(); ++i) table.Gather({&ids[i], 1}, again.data() + i * kDim);
  EXPECT_EQ(out, again);
}

}  // namespace
}  // namespace spark::engine::model::dsv41
