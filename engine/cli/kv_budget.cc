#include "engine/cli/kv_budget.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/strings.h"

namespace spark::engine::cli {

Result<int64_t> KvBlocksFromMemory(double fraction, int64_t available_bytes,
                                   int64_t bytes_per_token, int block_size) {
  if (!(fraction > 0 && fraction <= 0.9)) {
    return InvalidArgumentError("--kv-memory-fraction " + FormatNumber(fraction) +
                                ": must be in (0, 0.9]");
  }
  if (bytes_per_token < 1 || block_size < 1) {
    return InvalidArgumentError("KV cache sizing: bytes per token and block size must be >= 1");
  }
  const double budget = fraction * static_cast<double>(available_bytes);
  const double block_bytes = static_cast<double>(bytes_per_token) * block_size;
  const int64_t blocks = available_bytes > 0 ? static_cast<int64_t>(budget / block_bytes) : 0;
  if (blocks < 1) {
    return ResourceExhaustedError(
        "--kv-memory-fraction " + FormatNumber(fraction) + " of the " +
        HumanBytes(static_cast<uint64_t>(std::max<int64_t>(available_bytes, 0))) +
        " available after the weights does not hold one KV block (" +
        HumanBytes(static_cast<uint64_t>(block_bytes)) +
        "): free memory on the node, or give --num-kv-blocks");
  }
  return blocks;
}

Result<int64_t> ReadMemAvailable(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  if (!in) return NotFoundError("cannot read " + meminfo_path + " (needed by --kv-memory-fraction)");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    std::string unit;
    fields >> kib >> unit;
    if (kib < 0 || unit != "kB") break;
    return kib * 1024;
  }
  return InvalidArgumentError(meminfo_path + ": no 'MemAvailable: N kB' line");
}

}  // namespace spark::engine::cli
