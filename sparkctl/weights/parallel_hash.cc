#include "sparkctl/weights/parallel_hash.h"

#include <sched.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <thread>

namespace spark::weights {

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<Result<FileDigest>> HashFilesParallel(const std::vector<HashJob>& jobs, int threads,
                                                  const HashOptions& options,
                                                  HashProgress* progress) {
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].size_hint > jobs[b].size_hint; });

  std::vector<std::optional<Result<FileDigest>>> results(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1)) {
      size_t job = order[i];
      results[job].emplace(HashFile(jobs[job].path, options,
                                    progress ? &progress->bytes_done : nullptr));
      if (progress) progress->files_done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  if (threads <= 0) threads = AvailableCpus();
  size_t count = std::min<size_t>(static_cast<size_t>(threads), jobs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < count; ++t) pool.emplace_back(worker);
  if (count > 0) worker();  // the caller's thread is one of the workers
  for (std::thread& t : pool) t.join();

  std::vector<Result<FileDigest>> out;
  out.reserve(jobs.size());
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace spark::weights
