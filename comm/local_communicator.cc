#include "comm/local_communicator.h"

#include <cstring>
#include <string>

namespace spark::comm {

LocalGroupState::LocalGroupState(int world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size),
      timeout_(timeout),
      present_(world_size, false),
      buffers_(world_size, nullptr),
      bytes_(world_size, 0) {}

Status LocalGroupState::Publish(int rank, const void* data, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_[rank] = data;
    bytes_[rank] = bytes;
  }
  return Arrive(rank);
}

Status LocalGroupState::Release(int rank) { return Arrive(rank); }

Status LocalGroupState::Arrive(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return AbortedError("rank " + std::to_string(rank) + ": local group is broken");
  present_[rank] = true;
  if (++arrived_ == world_size_) {
    arrived_ = 0;
    ++generation_;
    present_.assign(world_size_, false);
    cv_.notify_all();
    return Status::Ok();
  }
  const uint64_t generation = generation_;
  const bool done =
      cv_.wait_for(lock, timeout_, [&] { return generation_ != generation || broken_; });
  if (done && !broken_) return Status::Ok();
  if (broken_) return AbortedError("rank " + std::to_string(rank) + ": local group is broken");
  broken_ = true;
  cv_.notify_all();
  std::string missing;
  for (int r = 0; r < world_size_; ++r) {
    if (!present_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return DeadlineExceededError(
      "rank " + std::to_string(rank) + ": local collective timed out after " +
      std::to_string(timeout_.count()) + " ms waiting for rank(s) " + missing);
}

Status LocalCommunicator::CheckSameSizes() const {
  for (int r = 1; r < world_size(); ++r) {
    if (state_->bytes(r) != state_->bytes(0)) {
      return InvalidArgumentError(
          "rank " + std::to_string(rank_) +
          ": collective sizes differ between ranks (rank 0: " + std::to_string(state_->bytes(0)) +
          " bytes, rank " + std::to_string(r) + ": " + std::to_string(state_->bytes(r)) + ")");
    }
  }
  return Status::Ok();
}

Status LocalCommunicator::AllReduceSum(float* data, size_t count) {
  SPARK_RETURN_IF_ERROR(state_->Publish(rank_, data, count * sizeof(float)));
  Status sizes = CheckSameSizes();
  std::vector<float> sum;
  if (sizes.ok()) {
    sum.assign(count, 0.0f);
    // Every rank adds in rank order, so all ranks get bit-identical sums.
    for (int r = 0; r < world_size(); ++r) {
      const float* src = static_cast<const float*>(state_->buffer(r));
      for (size_t i = 0; i < count; ++i) sum[i] += src[i];
    }
  }
  SPARK_RETURN_IF_ERROR(state_->Release(rank_));
  SPARK_RETURN_IF_ERROR(sizes);
  if (count > 0) std::memcpy(data, sum.data(), count * sizeof(float));
  return Status::Ok();
}

Status LocalCommunicator::AllGather(const float* in, size_t count, float* out) {
  SPARK_RETURN_IF_ERROR(state_->Publish(rank_, in, count * sizeof(float)));
  Status sizes = CheckSameSizes();
  if (sizes.ok() && count > 0) {
    for (int r = 0; r < world_size(); ++r) {
      std::memcpy(out + r * count, state_->buffer(r), count * sizeof(float));
    }
  }
  SPARK_RETURN_IF_ERROR(state_->Release(rank_));
  return sizes;
}

Status LocalCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= world_size()) {
    return InvalidArgumentError("rank " + std::to_string(rank_) + ": broadcast root " +
                                std::to_string(root) + " outside [0, " +
                                std::to_string(world_size()) + ")");
  }
  SPARK_RETURN_IF_ERROR(state_->Publish(rank_, data, bytes));
  Status sizes = CheckSameSizes();
  if (sizes.ok() && rank_ != root && bytes > 0) {
    std::memcpy(data, state_->buffer(root), bytes);
  }
  SPARK_RETURN_IF_ERROR(state_->Release(rank_));
  return sizes;
}

Status LocalCommunicator::Barrier() {
  SPARK_RETURN_IF_ERROR(state_->Publish(rank_, nullptr, 0));
  return state_->Release(rank_);
}

std::vector<std::unique_ptr<Communicator>> CreateLocalGroup(int world_size,
                                                            std::chrono::milliseconds timeout) {
  auto state = std::make_shared<LocalGroupState>(world_size, timeout);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < world_size; ++r) {
    group.push_back(std::make_unique<LocalCommunicator>(r, state));
  }
  return group;
}

}  // namespace spark::comm
