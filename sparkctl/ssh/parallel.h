// Parallel fan-out over nodes: run one command (or any per-node function) on every node at
// once on a Boost.Asio thread pool and collect one result per node, in input order.
//
// A dead node costs its own connect timeout and never holds up the others: each node's work
// runs on its own pool thread (up to max_parallel at a time).
// Thread-safety: the functions may be called from any thread; `fn` runs concurrently on pool
// threads, once per node, and must be safe for that (Transport implementations are).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"

namespace spark::ssh {

// Default: at most this many nodes are worked on at once.
inline constexpr size_t kDefaultMaxParallel = 32;

struct NodeRun {
  std::string node;
  Result<CommandResult> result;
};

// Runs `command` on every node; results[i] belongs to nodes[i]. Never fails as a whole: each
// node's error is in its own entry.
std::vector<NodeRun> RunAll(Transport& transport, const std::vector<std::string>& nodes,
                            const std::string& command, const RunOptions& options = {},
                            size_t max_parallel = kDefaultMaxParallel);

// Calls fn(i) for i in [0, count) on up to max_parallel pool threads; returns when all are done.
void ParallelFor(size_t count, size_t max_parallel, const std::function<void(size_t)>& fn);

// fn(node) on every node in parallel; element i is nodes[i]'s result.
template <typename T>
std::vector<Result<T>> ForEachNode(const std::vector<std::string>& nodes,
                                   const std::function<Result<T>(const std::string&)>& fn,
                                   size_t max_parallel = kDefaultMaxParallel) {
  std::vector<Result<T>> results(nodes.size(), Result<T>(InternalError("not run")));
  ParallelFor(nodes.size(), max_parallel, [&](size_t i) { results[i] = fn(nodes[i]); });
  return results;
}

// The statuses of ForEachNode joined into one: OK when all are OK, otherwise the first error's
// code with every failing node's message, one per line.
template <typename T>
Status JoinNodeErrors(const std::vector<Result<T>>& results) {
  Status first;
  std::string message;
  for (const auto& r : results) {
    if (r.ok()) continue;
    if (first.ok()) first = r.status();
    message += (message.empty() ? "" : "\n") + r.status().message();
  }
  return first.ok() ? first : Status(first.code(), message);
}

}  // namespace spark::ssh
