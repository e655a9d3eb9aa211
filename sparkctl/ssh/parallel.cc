#include "sparkctl/ssh/parallel.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace spark::ssh {

void ParallelFor(size_t count, size_t max_parallel, const std::function<void(size_t)>& fn) {
  if (count == 0) return;
  if (count == 1) {
    fn(0);
    return;
  }
  boost::asio::thread_pool pool(std::clamp<size_t>(max_parallel, 1, count));
  for (size_t i = 0; i < count; ++i) {
    boost::asio::post(pool, [&fn, i] { fn(i); });
  }
  pool.join();
}

std::vector<NodeRun> RunAll(Transport& transport, const std::vector<std::string>& nodes,
                            const std::string& command, const RunOptions& options,
                            size_t max_parallel) {
  std::vector<Result<CommandResult>> results = ForEachNode<CommandResult>(
      nodes, [&](const std::string& node) { return transport.Run(node, command, options); },
      max_parallel);
  std::vector<NodeRun> runs;
  runs.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    runs.push_back(NodeRun{nodes[i], std::move(results[i])});
  }
  return runs;
}

}  // namespace spark::ssh
