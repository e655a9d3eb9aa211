#include "comm/oneshot_cuda/staged_group.h"

#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "base/logging.h"

namespace spark::comm::oneshot {
namespace {

std::string CudaText(const char* what, cudaError_t e) {
  cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// Zeroed pinned host memory, mapped into the device's address space.
Result<Region> PinnedRegion(size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
      e != cudaSuccess) {
    return UnavailableError("one-shot mailbox: " + CudaText("cudaHostAlloc", e) + " (" +
                            std::to_string(bytes) + " bytes of pinned memory)");
  }
  std::memset(p, 0, bytes);
  return Region{p, bytes, [](void* q) { cudaFreeHost(q); }};
}

template <typename T>
Result<T*> DevicePointer(void* host) {
  void* dev = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&dev, host, 0); e != cudaSuccess) {
    return UnavailableError("one-shot mailbox: " + CudaText("cudaHostGetDevicePointer", e));
  }
  return static_cast<T*>(dev);
}

}  // namespace

Result<std::unique_ptr<StagedOneShot>> StagedOneShot::Create(Communicator& exchange, int device,
                                                             OneShotOptions options) {
  std::unique_ptr<StagedOneShot> g(new StagedOneShot());
  g->device_ = device;
  std::string error;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) error = CudaText("cudaSetDevice", e);
  if (error.empty()) {
    void* control = nullptr;
    if (cudaError_t e = cudaHostAlloc(&control, sizeof(StagedControl), cudaHostAllocMapped);
        e != cudaSuccess) {
      error = CudaText("cudaHostAlloc", e);
    } else {
      g->control_ = new (control) StagedControl();
    }
  }
  if (error.empty()) {
    if (cudaError_t e = cudaMalloc(&g->state_, sizeof(StagedState)); e != cudaSuccess) {
      g->state_ = nullptr;
      error = CudaText("cudaMalloc", e);
    } else if (cudaError_t z = cudaMemset(g->state_, 0, sizeof(StagedState)); z != cudaSuccess) {
      error = CudaText("cudaMemset", z);
    }
  }
  // Every rank takes the same path: one rank's failure stops them all before they connect.
  float failed = error.empty() ? 0.0f : 1.0f;
  SPARK_RETURN_IF_ERROR(exchange.AllReduceSum(&failed, 1));
  if (failed > 0) {
    return UnavailableError("one-shot (staged): " +
                            (error.empty() ? std::string("another rank could not set up") : error));
  }
  options.region = PinnedRegion;
  SPARK_ASSIGN_OR_RETURN(g->transport_, ConnectTransport(exchange, options));
  Mailbox& m = g->transport_->mailbox();
  SPARK_ASSIGN_OR_RETURN(g->args_.slots, DevicePointer<uint8_t>(m.base()));
  SPARK_ASSIGN_OR_RETURN(g->args_.flags, DevicePointer<const uint64_t>(m.Flags()));
  SPARK_ASSIGN_OR_RETURN(g->args_.sizes, DevicePointer<const uint32_t>(m.Sizes()));
  SPARK_ASSIGN_OR_RETURN(g->args_.control, DevicePointer<StagedControl>(g->control_));
  g->args_.slot_bytes = m.capacity();
  g->args_.rank = exchange.rank();
  g->args_.world = exchange.world_size();
  g->args_.state = g->state_;
  // The kernel's own bound comes after the host's, so the host names the peer first.
  g->args_.timeout_ns = static_cast<uint64_t>(options.transport.timeout.count()) * 1'000'000ull * 2;
  g->progress_ = std::thread([p = g.get()] { p->Progress(); });
  return g;
}

StagedOneShot::~StagedOneShot() {
  stop_ = true;
  if (progress_.joinable()) progress_.join();
  transport_.reset();
  cudaSetDevice(device_);
  if (state_ != nullptr) cudaFree(state_);
  if (control_ != nullptr) cudaFreeHost(control_);
  cudaGetLastError();
}

Status StagedOneShot::broken() const {
  return transport_ ? transport_->broken() : FailedPreconditionError("not connected");
}

void StagedOneShot::Abort() {
  std::atomic_ref<uint64_t>(control_->abort).store(1, std::memory_order_release);
}

// Answers the kernel's doorbell: puts the staged slice on the wire, then waits (bounded) for
// every peer's slice so that a missing one is named here, by rank.
void StagedOneShot::Progress() {
  uint64_t last = 0;
  auto idle_since = std::chrono::steady_clock::now();
  const int world = args_.world, rank = args_.rank;
  while (!stop_.load(std::memory_order_acquire)) {
    const uint64_t seq =
        std::atomic_ref<uint64_t>(control_->bell_seq).load(std::memory_order_acquire);
    if (seq == last) {
      // Poll closely while calls come (a decode step's all-reduces), back off when idle.
      if (std::chrono::steady_clock::now() - idle_since > std::chrono::milliseconds(2)) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      continue;
    }
    // Every call rung since the last answered one, in order (at most two: see StagedControl).
    Status s = seq <= last + 2
                   ? Status::Ok()
                   : InternalError("one-shot (staged): the GPU rang call " + std::to_string(seq) +
                                   " after " + std::to_string(last));
    for (uint64_t call = last + 1; call <= seq && s.ok(); ++call) {
      const auto bytes =
          static_cast<uint32_t>(std::atomic_ref<uint64_t>(control_->bell_bytes[call & 1])
                                    .load(std::memory_order_relaxed));
      s = transport_->Send(call, bytes);
      for (int src = 0; src < world && s.ok(); ++src) {
        if (src != rank) s = transport_->WaitFor(src, call, bytes);
      }
    }
    if (!s.ok()) {
      transport_->Fail(s);
      Abort();
      return;
    }
    last = seq;
    idle_since = std::chrono::steady_clock::now();
  }
}

Status StagedOneShot::EnqueueAllReduceSum(float* data, size_t count, cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(broken());
  return StagedAllReduceSum(args_, data, count, stream);
}

Status StagedOneShot::EnqueueAllGather(const float* in, size_t count, float* out,
                                       cudaStream_t stream) {
  SPARK_RETURN_IF_ERROR(broken());
  return StagedAllGather(args_, in, count, out, stream);
}

}  // namespace spark::comm::oneshot
