#include "comm/communicator.h"

#include <string>

#include "comm/local_communicator.h"
#if SPARK_HAVE_GLOO
#include "comm/gloo_communicator.h"
#endif

namespace spark::comm {

namespace {

Status ValidateOptions(const CommOptions& options) {
  if (options.world_size < 1) {
    return InvalidArgumentError("world size must be >= 1, got " +
                                std::to_string(options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgumentError("rank " + std::to_string(options.rank) + " outside [0, " +
                                std::to_string(options.world_size) + ")");
  }
  if (options.master_port <= 0 || options.master_port > 65535) {
    return InvalidArgumentError("master port " + std::to_string(options.master_port) +
                                " outside [1, 65535]");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options) {
  SPARK_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.backend == "local") {
    if (options.world_size != 1) {
      return InvalidArgumentError(
          "backend \"local\" through CreateCommunicator needs world size 1; use "
          "CreateLocalGroup for threads");
    }
    return std::move(CreateLocalGroup(1, options.timeout)[0]);
  }
  if (options.backend == "gloo") {
#if SPARK_HAVE_GLOO
    SPARK_ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(options));
    return std::unique_ptr<Communicator>(std::move(comm));
#else
    return UnimplementedError("this build has no Gloo (libgloo-dev not found at configure time)");
#endif
  }
  return InvalidArgumentError("unknown communicator backend \"" + options.backend +
                              "\" (expected gloo or local)");
}

Status BroadcastBytes(Communicator& comm, std::vector<uint8_t>* bytes, int root) {
  uint64_t size = comm.rank() == root ? bytes->size() : 0;
  SPARK_RETURN_IF_ERROR(comm.Broadcast(&size, sizeof(size), root));
  if (comm.rank() != root) bytes->resize(size);
  if (size == 0) return Status::Ok();
  return comm.Broadcast(bytes->data(), size, root);
}

}  // namespace spark::comm
