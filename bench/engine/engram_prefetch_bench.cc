// spark-engram-bench: what EngramTable::Prefetch buys a decode step whose Engram rows are not in
// the page cache (DeepSeek-V4.1's tables are ~98 GB each and stay on disk). A table file of
// released-width rows (F8_E4M3 x 256 and 8 E8M0 scales a row) is mapped as the loader maps a
// checkpoint; per round its pages are dropped from the page cache (POSIX_FADV_DONTNEED, no root
// needed) and one step's rows (batch x 24 columns x 2 Engram layers, random ids) are gathered
// either layer by layer as before ("plain"), or after one Prefetch of both layers' rows
// ("prefetched"), the two alternating. Prints ms per step (medians) and writes --json.
// Measures the disk this runs on; it says nothing about the compute the reads overlap.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "engine/model/deepseek_v41/weights.h"

namespace spark::bench {
namespace {

namespace dsv41 = engine::model::dsv41;
using Clock = std::chrono::steady_clock;

constexpr int kDim = 256, kColumns = 24, kLayers = 2;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  CLI::App app{"Engram rows from a cold page cache: gathered layer by layer, or prefetched first"};
  std::string file = "engram_table.bin", batches = "1,8,32", json;
  int64_t rows = int64_t{1} << 22;  // 1 GiB of rows
  int rounds = 7;
  app.add_option("--file", file, "table file (created when missing or of another size)");
  app.add_option("--rows", rows, "table rows (256 bytes and 8 scales each)");
  app.add_option("--batch", batches, "decode batch sizes, comma-separated");
  app.add_option("--rounds", rounds, "rounds per mode and batch (each on a dropped cache)");
  app.add_option("--json", json, "write the figures here");
  CLI11_PARSE(app, argc, argv);

  const size_t bytes = static_cast<size_t>(rows) * (kDim + kDim / 32);
  if (!std::filesystem::exists(file) || std::filesystem::file_size(file) != bytes) {
    std::printf("writing %s (%.2f GiB)\n", file.c_str(), bytes / double(1 << 30));
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    std::vector<char> chunk(1 << 24);
    std::mt19937 rng(1);
    for (char& c : chunk) c = static_cast<char>(rng() % 120);  // finite E4M3 values
    for (size_t done = 0; done < bytes; done += chunk.size()) {
      out.write(chunk.data(), static_cast<std::streamsize>(std::min(chunk.size(), bytes - done)));
    }
  }
  const int fd = open(file.c_str(), O_RDONLY);
  if (fd < 0) {
    std::fprintf(stderr, "spark-engram-bench: cannot open %s\n", file.c_str());
    return 1;
  }
  auto* map = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0));
  madvise(map, bytes, MADV_RANDOM);
  const engine::model::dsv4::RawTensor weight{
      "w", "F8_E4M3", 1, {rows, kDim}, {map, static_cast<size_t>(rows) * kDim}, file};
  const engine::model::dsv4::RawTensor scale{
      "s", "F8_E8M0", 1, {rows, kDim / 32},
      {map + static_cast<size_t>(rows) * kDim, static_cast<size_t>(rows) * (kDim / 32)}, file};
  const dsv41::EngramTable table(&weight, &scale, engine::core::DType::kF8E4M3, rows, kDim);

  std::mt19937_64 rng(7);
  nlohmann::json j = {{"schema", "spark-bench-engram-prefetch/v1"},
                      {"file", file},
                      {"table_bytes", bytes},
                      {"rounds", rounds},
                      {"rows", nlohmann::json::array()}};
  std::printf("%-6s %8s %14s %16s %9s\n", "batch", "rows", "plain ms/step", "prefetched ms/step",
              "speedup");
  for (const std::string& b : CLI::detail::split(batches, ',')) {
    const int batch = std::stoi(b);
    std::vector<double> plain, prefetched;
    std::vector<std::vector<int64_t>> ids(kLayers, std::vector<int64_t>(batch * kColumns));
    std::vector<float> out(static_cast<size_t>(batch) * kColumns * kDim);
    for (int r = 0; r < 2 * rounds; ++r) {
      for (auto& layer : ids) {
        for (int64_t& id : layer) id = static_cast<int64_t>(rng() % rows);
      }
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      const bool prefetch = r % 2 == 1;
      const Clock::time_point t0 = Clock::now();
      if (prefetch) {
        for (const auto& layer : ids) table.Prefetch(layer);
      }
      for (const auto& layer : ids) table.Gather(layer, out.data());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      (prefetch ? prefetched : plain).push_back(ms);
    }
    const double a = Median(plain), p = Median(prefetched);
    std::printf("%-6d %8d %14.3f %16.3f %8.2fx\n", batch, batch * kColumns * kLayers, a, p, a / p);
    j["rows"].push_back({{"batch", batch},
                         {"rows_per_step", batch * kColumns * kLayers},
                         {"plain_ms", plain},
                         {"prefetched_ms", prefetched},
                         {"plain_median_ms", a},
                         {"prefetched_median_ms", p},
                         {"speedup", a / p}});
  }
  munmap(map, bytes);
  close(fd);
  if (!json.empty()) {
    std::ofstream(json) << j.dump(2) << "\n";
    std::printf("wrote %s\n", json.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace spark::bench

int main(int argc, char** argv) { return spark::bench::Main(argc, argv); }
