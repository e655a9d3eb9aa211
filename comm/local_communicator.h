// LocalCommunicator: a Communicator for N ranks that are threads of one process.
//
// The ranks of a group share one LocalGroupState; each collective is two rendezvous of all
// ranks (buffers published, then buffers consumed), so no data is copied through a socket.
// Used by tests and by `spark-engine generate --tp N` in one process. A rank that does not
// arrive within the timeout breaks the group: every later call returns Aborted.
// Thread-safety: each LocalCommunicator is used by its own thread; the shared state is locked.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/communicator.h"

namespace spark::comm {

// What the ranks of one local group share.
class LocalGroupState {
 public:
  LocalGroupState(int world_size, std::chrono::milliseconds timeout);

  int world_size() const { return world_size_; }

  // Publishes this rank's buffer and byte size, then waits for all ranks.
  // Returns DeadlineExceeded naming the ranks that did not arrive, or Aborted once broken.
  Status Publish(int rank, const void* data, size_t bytes);
  // Waits until all ranks are done reading the published buffers.
  Status Release(int rank);

  const void* buffer(int rank) const { return buffers_[rank]; }
  size_t bytes(int rank) const { return bytes_[rank]; }

 private:
  Status Arrive(int rank);

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  bool broken_ = false;
  std::vector<bool> present_;
  std::vector<const void*> buffers_;
  std::vector<size_t> bytes_;
};

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(int rank, std::shared_ptr<LocalGroupState> state)
      : rank_(rank), state_(std::move(state)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return state_->world_size(); }
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;

 private:
  // InvalidArgument when ranks published different sizes (every rank sees the same answer).
  Status CheckSameSizes() const;

  const int rank_;
  std::shared_ptr<LocalGroupState> state_;
};

}  // namespace spark::comm
