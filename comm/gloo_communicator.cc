#include "comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include "base/logging.h"
#include "comm/gloo_store.h"

namespace spark::comm {

namespace {

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Gloo's timeout messages contain "Timed out"; everything else is a transport failure.
Status FromGlooError(const std::string& where, const std::exception& e) {
  const std::string what = e.what();
  if (what.find("imed out") != std::string::npos || what.find("imeout") != std::string::npos) {
    return DeadlineExceededError(where + ": " + what);
  }
  return UnavailableError(where + ": " + what);
}

}  // namespace

template <typename Fn>
Status GlooCommunicator::Guard(const char* op, Fn&& fn) {
  const std::string where = "rank " + std::to_string(options_.rank) + ": gloo " + op;
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return FromGlooError(where, e);
  }
}

Result<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(const CommOptions& options) {
  std::unique_ptr<GlooCommunicator> comm(new GlooCommunicator(options));
  SPARK_RETURN_IF_ERROR(comm->Connect());
  return comm;
}

GlooCommunicator::~GlooCommunicator() {
  context_.reset();
  device_.reset();
}

Status GlooCommunicator::Connect() {
  RendezvousOptions rdv{options_.rank, options_.world_size, options_.master_addr,
                        options_.master_port, options_.timeout};
  SPARK_ASSIGN_OR_RETURN(rendezvous_, Rendezvous::Connect(rdv));
  const std::string me = HostName() + ":" + std::to_string(getpid());
  SPARK_RETURN_IF_ERROR(rendezvous_->Join("gloo", me).status());

  std::string listen = options_.listen_addr;
  if (listen.empty()) {
    SPARK_ASSIGN_OR_RETURN(listen, LocalAddressFor(options_.master_addr));
  }
  GlooStore store(rendezvous_.get(), "gloo/mesh/", options_.timeout);
  auto context = std::make_shared<::gloo::rendezvous::Context>(options_.rank, options_.world_size);
  context->setTimeout(options_.timeout);
  Status status = Guard("connect", [&] {
    ::gloo::transport::tcp::attr attr(listen.c_str());
    device_ = ::gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(store, device_);
  });
  if (!store.last_error().ok()) return store.last_error().WithContext(rendezvous_->Where());
  SPARK_RETURN_IF_ERROR(status.WithContext("listening on " + listen));
  context_ = std::move(context);
  Logger("engine.comm")
      ->info("rank {}/{} connected via gloo tcp on {}", options_.rank, options_.world_size, listen);
  return Status::Ok();
}

Status GlooCommunicator::AllReduceSum(float* data, size_t count) {
  if (count == 0 || options_.world_size == 1) return Status::Ok();
  return Guard("allreduce", [&] {
    ::gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
    ::gloo::allreduce(opts);
  });
}

Status GlooCommunicator::AllGather(const float* in, size_t count, float* out) {
  if (count == 0) return Status::Ok();
  return Guard("allgather", [&] {
    ::gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(in), count);
    opts.setOutput(out, count * options_.world_size);
    ::gloo::allgather(opts);
  });
}

Status GlooCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= options_.world_size) {
    return InvalidArgumentError("rank " + std::to_string(options_.rank) + ": broadcast root " +
                                std::to_string(root) + " outside [0, " +
                                std::to_string(options_.world_size) + ")");
  }
  if (bytes == 0 || options_.world_size == 1) return Status::Ok();
  return Guard("broadcast", [&] {
    ::gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    ::gloo::broadcast(opts);
  });
}

Status GlooCommunicator::Barrier() {
  if (options_.world_size == 1) return Status::Ok();
  return Guard("barrier", [&] {
    ::gloo::BarrierOptions opts(context_);
    ::gloo::barrier(opts);
  });
}

}  // namespace spark::comm
