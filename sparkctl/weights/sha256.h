// SHA-256 of files and byte strings on OpenSSL's EVP interface (which uses the CPU's SHA
// extensions — SHA-NI on x86, the ARMv8 crypto extensions on GB10 — when present).
//
// Files are read sequentially in large buffers with posix_fadvise(SEQUENTIAL) so the kernel reads
// ahead; SHA-256 itself is sequential, so parallelism comes from hashing several files at once
// (parallel_hash.h).
// Thread-safety: all functions are reentrant; call them from as many threads as there are cores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::weights {

struct HashOptions {
  size_t buffer_bytes = 8u << 20;  // per read(); 4-16 MiB keeps syscalls and cache misses low
  bool drop_cache_after = false;   // POSIX_FADV_DONTNEED when done (keeps RAM for the engine)
};

struct FileDigest {
  std::string sha256;  // 64 lowercase hex digits
  uint64_t bytes = 0;  // bytes actually read (the file's size at read time)
};

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Hashes the file at `path`. Adds every chunk's size to `*progress_bytes` as it goes (may be
// null). `cancel`, when set to true by another thread, stops the read with Cancelled.
// Returns NotFound / PermissionDenied / DataLoss (EIO) naming the file.
Result<FileDigest> HashFile(const std::string& path, const HashOptions& options,
                            std::atomic<uint64_t>* progress_bytes = nullptr,
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace spark::weights
