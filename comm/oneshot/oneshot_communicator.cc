#include "comm/oneshot/oneshot_communicator.h"

#include <algorithm>

#include "base/logging.h"

namespace spark::comm::oneshot {

OneShotCommunicator::OneShotCommunicator(std::unique_ptr<Communicator> fallback,
                                         std::unique_ptr<Transport> transport, size_t max_bytes)
    : fallback_(std::move(fallback)),
      transport_(std::move(transport)),
      max_bytes_(std::min(max_bytes, transport_->capacity())) {}

// The transport's threads go first: they may still be delivering a neighbour's goodbye.
OneShotCommunicator::~OneShotCommunicator() {
  Logger("engine.comm")
      ->info("rank {}: {} collective(s) one-shot, {} through the fallback", rank(), oneshot_calls_,
             fallback_calls_);
  transport_.reset();
}

Result<std::unique_ptr<OneShotCommunicator>> OneShotCommunicator::Create(
    std::unique_ptr<Communicator> fallback, const OneShotOptions& options) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                         ConnectTransport(*fallback, options));
  return std::make_unique<OneShotCommunicator>(std::move(fallback), std::move(transport),
                                               options.capacity_bytes);
}

Status OneShotCommunicator::AllReduceSum(float* data, size_t count) {
  if (world_size() == 1 || count == 0) return Status::Ok();
  if (count * sizeof(float) <= max_bytes_) {
    ++oneshot_calls_;
    return transport_->AllReduceSum(data, count);
  }
  ++fallback_calls_;
  return fallback_->AllReduceSum(data, count);
}

Status OneShotCommunicator::AllGather(const float* in, size_t count, float* out) {
  if (count * sizeof(float) <= max_bytes_ && world_size() > 1) {
    ++oneshot_calls_;
    return transport_->AllGather(in, count, out);
  }
  ++fallback_calls_;
  return fallback_->AllGather(in, count, out);
}

Status OneShotCommunicator::Broadcast(void* data, size_t bytes, int root) {
  return fallback_->Broadcast(data, bytes, root);
}

Status OneShotCommunicator::Barrier() { return fallback_->Barrier(); }

}  // namespace spark::comm::oneshot
