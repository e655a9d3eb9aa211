// One rank of a collective benchmark (`spark-bench allreduce|allgather`, started by `sparkctl
// bench`): joins the others through the engine's Rendezvous, picks NCCL (GPU) or Gloo (CPU),
// runs nccl-tests' sweep (warm-up over doubling sizes, then per size an out-of-place and an
// in-place group: one untimed run, a barrier, -n timed runs, then a checked run with fresh
// data), and reports each group's time and wrong-element count to rank 0 through the store.
// Rank 0 averages the times over ranks (nccl-tests' default), sums the wrong elements and
// prints the nccl-tests report (or JSON) to `out` as the rows arrive.
//
// The data: element i of rank r on repetition k is ((r+1)*7 + 3i + k) mod 61, small integers
// whose float sums over up to 2^17 ranks are exact, so a check compares for equality.
// Thread-safety: RunCollectiveRank blocks its caller; one call per process.
#pragma once

#include <cstdio>
#include <functional>
#include <vector>
#include <memory>
#include <string>

#include "base/status.h"
#include "sparkctl/bench/collective_options.h"

namespace spark::bench {

// What the sweep needs from a backend (Gloo on host memory, NCCL on device memory).
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string name() const = 0;  // "nccl", "gloo"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Allocates the send and receive buffers (elements of float).
  virtual Status Allocate(size_t send_count, size_t recv_count) = 0;
  virtual float* send() = 0;
  virtual float* recv() = 0;
  // Host <-> backend memory.
  virtual Status Upload(const float* host, float* dst, size_t count) = 0;
  virtual Status Download(const float* src, float* host, size_t count) = 0;
  // Starts one collective (may return before it is done); Wait() finishes all started ones.
  virtual Status Start(Collective c, const float* send, float* recv, size_t count) = 0;
  virtual Status Wait() = 0;
  virtual Status Barrier() = 0;
};

// The value rank `rank` contributes at element i on repetition rep.
float BenchValue(int rank, size_t i, int rep);

// Runs the sweep with `backend`; rank 0 writes the report to `out`. `rendezvous_report` sets
// and gets the per-group results (key, value) — the engine Rendezvous in production.
struct ReportChannel {
  std::function<Status(const std::string& key, const std::string& value)> set;
  std::function<Result<std::string>(const std::string& key)> get;
};
// Returns the number of wrong elements seen over all ranks on rank 0 (0 elsewhere), or the
// backend's errors. `device_lines` (rank 0) are the header's "Using devices" lines.
Result<int64_t> RunSweep(const CollectiveOptions& options, CollectiveBackend& backend,
                         const ReportChannel& channel, const std::vector<std::string>& device_lines,
                         int nccl_headers, int nccl_library, std::FILE* out);

// The whole rank: rendezvous, backend choice, sweep. Exit status for main: 0 ok, 2 wrong
// results or failure (the error is printed to stderr naming the rank).
int RunCollectiveRank(const CollectiveOptions& options, const RankPlacement& placement);

}  // namespace spark::bench
