#include "engine/backend/cuda/graph_steps.h"

#include <cstring>
#include <thread>

#include "engine/backend/backend.h"
#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {
namespace {

constexpr size_t kOutBytes = 4 << 20;

}  // namespace

GraphSteps::~GraphSteps() {
  DropAll();
  if (out_host_ != nullptr) cudaFreeHost(out_host_);
  for (cudaEvent_t e : step_done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (int i = 0; i < kTimedSlots; ++i) {
    if (step_begin_[i] != nullptr) cudaEventDestroy(step_begin_[i]);
    if (step_end_[i] != nullptr) cudaEventDestroy(step_end_[i]);
  }
}

Status GraphSteps::Init(cudaStream_t stream, bool time_steps) {
  stream_ = stream;
  out_bytes_ = kOutBytes;
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&out_host_, 2 * out_bytes_));
  for (cudaEvent_t& e : step_done_) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  time_steps_ = time_steps;
  if (time_steps) {
    for (int i = 0; i < kTimedSlots; ++i) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreate(&step_begin_[i]));
      SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreate(&step_end_[i]));
    }
  }
  return Status::Ok();
}

Status GraphSteps::CheckCanBegin(int table_blocks) const {
  if (in_graph()) {
    return FailedPreconditionError("cuda backend: graph step '" + key_ +
                                   "' has not ended (no Download yet)");
  }
  if (table_blocks <= 0) return InvalidArgumentError("cuda backend: table_blocks must be > 0");
  if (launched_.size() >= Backend::kMaxDownloadsLater) {
    return FailedPreconditionError("cuda backend: " + std::to_string(launched_.size()) +
                                   " graph steps launched ahead and not taken (TakeDownload)");
  }
  return Status::Ok();
}

Status GraphSteps::Begin(const std::string& key, int table_blocks, bool eager_since) {
  eager_since_graph_ = eager_since;
  // A step launched ahead still has its inputs and output in one host area: take the other.
  parity_ = launched_.empty() ? 0 : 1 - launched_.back().parity;
  key_ = key + "/t" + std::to_string(table_blocks) + (parity_ == 0 ? "" : "/p1");
  table_blocks_ = table_blocks;
  ops_ = 0;
  if (graphs_.count(key_) > 0) {
    mode_ = Mode::kReplay;
    return Status::Ok();
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  mode_ = Mode::kCapture;
  return Status::Ok();
}

void GraphSteps::Cancel() {
  if (mode_ == Mode::kCapture) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  mode_ = Mode::kEager;
}

Result<GraphSteps::Launched> GraphSteps::Launch(const float* src, size_t bytes,
                                                const Status& status, const HostPass& pass) {
  const Mode mode = mode_;
  mode_ = Mode::kEager;
  char* out_host = out_host_ + parity_ * out_bytes_;
  if (mode == Mode::kCapture) {
    Status captured = status;
    if (captured.ok() && bytes > out_bytes_) {
      captured = InvalidArgumentError("cuda backend: a graph step's output is limited to " +
                                      std::to_string(out_bytes_) + " bytes");
    }
    if (captured.ok()) {
      const cudaError_t e = cudaMemcpyAsync(out_host, src, bytes, cudaMemcpyDeviceToHost, stream_);
      if (e != cudaSuccess) {
        captured = InternalError(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(e));
      }
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    SPARK_RETURN_IF_ERROR(captured);
    SPARK_CUDA_RETURN_IF_ERROR(end);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    SPARK_CUDA_RETURN_IF_ERROR(inst);
    graphs_[key_] = {exec, bytes, {ops_, pass.staged, pass.arena}};
  }
  const Captured& g = graphs_.at(key_);
  if (g.out_bytes != bytes || g.pass.ops != ops_ || g.pass.staged != pass.staged ||
      g.pass.arena != pass.arena) {
    return InternalError(
        "cuda backend: graph step '" + key_ + "' ran " + std::to_string(ops_) + " ops staging " +
        std::to_string(pass.staged) + " bytes and downloading " + std::to_string(bytes) +
        ", but was captured with " + std::to_string(g.pass.ops) + ", " +
        std::to_string(g.pass.staged) + " and " + std::to_string(g.out_bytes) +
        " (or other workspace): a key must name one op sequence; not launched");
  }
  Launched step{parity_, -1, !eager_since_graph_, bytes};
  if (time_steps_) {
    step.timed_slot = static_cast<int>(steps_launched_ % kTimedSlots);
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_begin_[step.timed_slot], stream_));
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g.exec, stream_));
  if (step.timed_slot >= 0) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_end_[step.timed_slot], stream_));
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_done_[parity_], stream_));
  ++steps_launched_;
  eager_since_graph_ = false;
  return step;
}

Status GraphSteps::Wait(cudaEvent_t event) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) SPARK_CUDA_RETURN_IF_ERROR(e);
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceededError("cuda backend: a graph step still runs after " +
                                   std::to_string(timeout_.count()) +
                                   " ms (a peer rank stopped in a collective?)");
    }
    std::this_thread::yield();
  }
}

Status GraphSteps::AddTime(int slot, bool after_graph) {
  float ms = 0;
  SPARK_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, step_begin_[slot], step_end_[slot]));
  times_.gpu_ms += ms;
  ++times_.steps;
  if (after_graph) {
    const int before = (slot + kTimedSlots - 1) % kTimedSlots;
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, step_end_[before], step_begin_[slot]));
    times_.gap_ms += ms;
    ++times_.gaps;
  }
  return Status::Ok();
}

Status GraphSteps::Finish(const Launched& step, std::span<float> host) {
  SPARK_RETURN_IF_ERROR(Wait(step_done_[step.parity]));
  if (step.timed_slot >= 0) SPARK_RETURN_IF_ERROR(AddTime(step.timed_slot, step.after_graph));
  std::memcpy(host.data(), out_host_ + step.parity * out_bytes_, step.bytes);
  return Status::Ok();
}

GraphSteps::Launched GraphSteps::Pop() {
  Launched step = std::move(launched_.front());
  launched_.pop_front();
  return step;
}

void GraphSteps::DropAll() {
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
  graphs_.clear();
}

}  // namespace spark::engine::backend::cuda
