// NcclCommunicator: NCCL collectives on one GPU per rank (see nccl_communicator.h).
#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

namespace spark::comm {
namespace {

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

const char* Base(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

}  // namespace

// A CUDA or NCCL failure as an Internal status naming host, rank and file:line.
#define SPARK_CUDA_CHECK(expr)                                                                \
  do {                                                                                        \
    cudaError_t e_ = (expr);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      return InternalError(Where() + ": " + Base(__FILE__) + ":" + std::to_string(__LINE__) + \
                           ": " #expr ": " + cudaGetErrorString(e_));                         \
    }                                                                                         \
  } while (0)
#define SPARK_NCCL_CHECK(expr)                                                                \
  do {                                                                                        \
    ncclResult_t r_ = (expr);                                                                 \
    if (r_ != ncclSuccess) {                                                                  \
      return InternalError(Where() + ": " + Base(__FILE__) + ":" + std::to_string(__LINE__) + \
                           ": " #expr ": " + ncclGetErrorString(r_) + " (" +                  \
                           ncclGetLastError(comm_) + ")");                                    \
    }                                                                                         \
  } while (0)

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device,
                                   std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), device_(device), timeout_(timeout) {}

std::string NcclCommunicator::Where() const {
  return HostName() + " rank " + std::to_string(rank_);
}

int NcclCommunicator::HeaderVersion() { return NCCL_VERSION_CODE; }

int NcclCommunicator::LibraryVersion() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    Rendezvous& rendezvous, int device, const std::string& session,
    std::chrono::milliseconds timeout) {
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(rendezvous.rank(), rendezvous.world_size(), device, timeout));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device < 0 || device >= devices) {
    return FailedPreconditionError(c->Where() + ": CUDA device " + std::to_string(device) +
                                   " does not exist (" + std::to_string(devices) +
                                   " visible); check CUDA_VISIBLE_DEVICES and nvidia-smi");
  }
  SPARK_RETURN_IF_ERROR(c->Connect(rendezvous, session));
  return c;
}

Status NcclCommunicator::Connect(Rendezvous& rendezvous, const std::string& session) {
  SPARK_CUDA_CHECK(cudaSetDevice(device_));
  SPARK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ncclUniqueId id;
  const std::string key = session + "/nccl-id";
  if (rank_ == 0) {
    SPARK_NCCL_CHECK(ncclGetUniqueId(&id));
    SPARK_RETURN_IF_ERROR(
        rendezvous.Set(key, std::vector<char>(id.internal, id.internal + sizeof(id))));
  } else {
    auto value = rendezvous.Get(key, timeout_);
    if (!value.ok()) {
      return DeadlineExceededError(Where() + ": rank 0 never published the NCCL id (" +
                                   value.status().message() + ")");
    }
    if (value->size() != sizeof(id)) return InternalError(Where() + ": NCCL id has the wrong size");
    std::memcpy(id.internal, value->data(), sizeof(id));
  }
  SPARK_NCCL_CHECK(ncclCommInitRank(&comm_, world_size_, id, rank_));
  return Status::Ok();
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) aborted_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status NcclCommunicator::EnqueueAllReduceSum(const float* send, float* recv, size_t count) {
  return EnqueueAllReduceSum(send, recv, count, stream_);
}

Status NcclCommunicator::EnqueueAllGather(const float* send, float* recv, size_t count) {
  return EnqueueAllGather(send, recv, count, stream_);
}

Status NcclCommunicator::EnqueueAllReduceSum(const float* send, float* recv, size_t count,
                                             CUstream_st* stream) {
  if (aborted_) return FailedPreconditionError(Where() + ": communicator was aborted");
  SPARK_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm_, stream));
  return Status::Ok();
}

Status NcclCommunicator::EnqueueAllGather(const float* send, float* recv, size_t count,
                                          CUstream_st* stream) {
  if (aborted_) return FailedPreconditionError(Where() + ": communicator was aborted");
  SPARK_NCCL_CHECK(ncclAllGather(send, recv, count, ncclFloat, comm_, stream));
  return Status::Ok();
}

Status NcclCommunicator::Synchronize() {
  if (aborted_) return FailedPreconditionError(Where() + ": communicator was aborted");
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) SPARK_CUDA_CHECK(e);
    ncclResult_t async = ncclSuccess;
    SPARK_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    SPARK_NCCL_CHECK(async);
    if (std::chrono::steady_clock::now() > deadline) {
      aborted_ = true;
      return DeadlineExceededError(Where() + ": collective still running after " +
                                   std::to_string(timeout_.count()) +
                                   " ms; a peer rank is gone or the fabric stalls");
    }
  }
}

Status NcclCommunicator::AllReduceSum(float* data, size_t count) {
  SPARK_RETURN_IF_ERROR(EnqueueAllReduceSum(data, data, count));
  return Synchronize();
}

Status NcclCommunicator::AllGather(const float* in, size_t count, float* out) {
  SPARK_RETURN_IF_ERROR(EnqueueAllGather(in, out, count));
  return Synchronize();
}

Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= world_size_) {
    return InvalidArgumentError(Where() + ": broadcast root " + std::to_string(root) +
                                " outside [0, " + std::to_string(world_size_) + ")");
  }
  SPARK_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  return Synchronize();
}

Status NcclCommunicator::Barrier() {
  // A one-element all-reduce: NCCL has no barrier of its own.
  float* scratch = nullptr;
  SPARK_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), sizeof(float), stream_));
  SPARK_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(float), stream_));
  Status s = AllReduceSum(scratch, 1);
  cudaFreeAsync(scratch, stream_);
  return s;
}

}  // namespace spark::comm
