// Helpers for communicator tests: run one function per rank on its own thread.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "comm/socket.h"

namespace spark::comm {

// Runs fn(rank) for every rank on its own thread and waits for all.
inline void RunRanks(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// A loopback port that was free a moment ago.
inline int FreePort() {
  auto socket = Listen("127.0.0.1", 0);
  return socket.ok() ? LocalPort(*socket).value_or(0) : 0;
}

}  // namespace spark::comm
