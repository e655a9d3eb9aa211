// The KV cache sized from memory (`serve --kv-memory-fraction F`, a profile's
// engine.kv_cache.memory_fraction): once a rank's weights are loaded, F of the memory the node
// still has available becomes KV blocks. On DGX Spark the GPU allocates from the node's unified
// memory, so /proc/meminfo's MemAvailable is what is left for the cache on either backend.
// The ranks of a group take the smallest count any of them can hold (rank 0's BlockManager hands
// out the same block ids to all). The cache never takes the memory the start-up floor keeps
// (memory_plan.h), whatever the fraction.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace spark::engine::cli {

// Blocks of `block_size` tokens that `fraction` of `available_bytes` holds at
// `bytes_per_token`, leaving at least `keep_bytes` of it (the floor and what the rank has still
// to allocate). InvalidArgument for a fraction outside (0, 0.9] or non-positive sizes;
// ResourceExhausted when not even one block fits (naming the memory found and the fix).
Result<int64_t> KvBlocksFromMemory(double fraction, int64_t available_bytes,
                                   int64_t bytes_per_token, int block_size,
                                   int64_t keep_bytes = 0);

}  // namespace spark::engine::cli
