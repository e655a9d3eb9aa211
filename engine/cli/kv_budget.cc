#include "engine/cli/kv_budget.h"

#include <algorithm>

#include "base/strings.h"

namespace spark::engine::cli {

Result<int64_t> KvBlocksFromMemory(double fraction, int64_t available_bytes,
                                   int64_t bytes_per_token, int block_size, int64_t keep_bytes) {
  if (!(fraction > 0 && fraction <= 0.9)) {
    return InvalidArgumentError("--kv-memory-fraction " + FormatNumber(fraction) +
                                ": must be in (0, 0.9]");
  }
  if (bytes_per_token < 1 || block_size < 1) {
    return InvalidArgumentError("KV cache sizing: bytes per token and block size must be >= 1");
  }
  const double budget =
      std::min(fraction * static_cast<double>(available_bytes),
               static_cast<double>(std::max<int64_t>(0, available_bytes - keep_bytes)));
  const double block_bytes = static_cast<double>(bytes_per_token) * block_size;
  const int64_t blocks = available_bytes > 0 ? static_cast<int64_t>(budget / block_bytes) : 0;
  if (blocks < 1) {
    return ResourceExhaustedError(
        "--kv-memory-fraction " + FormatNumber(fraction) + " of the " +
        HumanBytes(static_cast<uint64_t>(std::max<int64_t>(available_bytes, 0))) +
        " available after the weights" +
        (keep_bytes > 0 ? ", less the " + HumanBytes(static_cast<uint64_t>(keep_bytes)) +
                              " kept free (the start-up floor and the step's activations),"
                        : std::string()) +
        " does not hold one KV block (" + HumanBytes(static_cast<uint64_t>(block_bytes)) +
        "): free memory on the node, or give --num-kv-blocks");
  }
  return blocks;
}

}  // namespace spark::engine::cli
