// GlooCommunicator: Communicator over Gloo's TCP transport, one process (or thread) per rank.
// Creation: Rendezvous::Connect (rank 0 serves the store), Join("gloo") so a missing rank is
// named, then Gloo's full-mesh connect through GlooStore. Every Gloo exception is caught here
// and becomes a Status naming this rank; a collective that outlives CommOptions::timeout gives
// DeadlineExceeded.
// Thread-safety: one thread at a time per communicator (Gloo contexts are not reentrant).
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/rendezvous.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace spark::comm {

class GlooCommunicator : public Communicator {
 public:
  // Returns InvalidArgument, Unavailable or DeadlineExceeded (see CreateCommunicator).
  static Result<std::unique_ptr<GlooCommunicator>> Create(const CommOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  Status AllReduceSum(float* data, size_t count) override;
  Status AllGather(const float* in, size_t count, float* out) override;
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;

 private:
  explicit GlooCommunicator(const CommOptions& options) : options_(options) {}
  Status Connect();
  // Runs a Gloo call, turning its exceptions into a Status that names `op` and this rank.
  template <typename Fn>
  Status Guard(const char* op, Fn&& fn);

  const CommOptions options_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;
};

}  // namespace spark::comm
