// OneShotCommunicator: a Communicator that sends small all-reduces and all-gathers through the
// one-shot transport and everything else through another communicator (Gloo for CPU ranks):
// the engine's collective choice by size. A tensor of up to max_bytes (an all-gather: per rank)
// takes the one-shot path; larger ones, broadcasts and barriers take the fallback. Every rank
// makes the same choice because every rank calls with the same sizes.
// Host memory only (device tensors: comm/oneshot_cuda, behind the CUDA backend's
// StreamOrderedCommunicator).
// Thread-safety: one thread at a time, as the wrapped communicators.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "comm/oneshot/setup.h"
#include "comm/oneshot/transport.h"

namespace spark::comm::oneshot {

class OneShotCommunicator : public Communicator {
 public:
  // max_bytes is clamped to the transport's capacity.
  OneShotCommunicator(std::unique_ptr<Communicator> fallback,
                      std::unique_ptr<Transport> transport, size_t max_bytes);
  ~OneShotCommunicator() override;

  // Collective: connects a transport over `fallback` (setup.h) and wraps both.
  static Result<std::unique_ptr<OneShotCommunicator>> Create(
      std::unique_ptr<Communicator> fallback, const OneShotOptions& options);

  int rank() const override { return fallback_->rank(); }
  int world_size() const override { return fallback_->world_size(); }
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;

  size_t max_bytes() const { return max_bytes_; }
  Transport& transport() { return *transport_; }
  // Calls that took each path (for logs and tests).
  uint64_t oneshot_calls() const { return oneshot_calls_; }
  uint64_t fallback_calls() const { return fallback_calls_; }

 private:
  std::unique_ptr<Communicator> fallback_;
  std::unique_ptr<Transport> transport_;
  const size_t max_bytes_;
  uint64_t oneshot_calls_ = 0;
  uint64_t fallback_calls_ = 0;
};

}  // namespace spark::comm::oneshot
