// Hashes many files at once on a fixed pool of threads.
//
// SHA-256 of one file is sequential, so the unit of parallel work is the file: workers take the
// largest remaining file first (longest-processing-time order), which keeps all cores busy until
// the end even for a few large shards. Progress is published through atomic counters that a
// ProgressMeter (progress.h) or a caller may read at any time.
// Thread-safety: HashFilesParallel blocks the caller; HashProgress may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/weights/sha256.h"

namespace spark::weights {

struct HashJob {
  std::string path;        // file to read
  uint64_t size_hint = 0;  // for scheduling only (largest first)
};

struct HashProgress {
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> files_done{0};
};

// The number of CPUs this process may run on (sched_getaffinity), at least 1.
int AvailableCpus();

// Hashes every job with min(threads, jobs) workers; threads <= 0 means AvailableCpus().
// Returns one Result per job, in job order; a failed file does not stop the others.
std::vector<Result<FileDigest>> HashFilesParallel(const std::vector<HashJob>& jobs, int threads,
                                                  const HashOptions& options,
                                                  HashProgress* progress = nullptr);

}  // namespace spark::weights
