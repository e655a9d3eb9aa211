// CudaBackend's graph steps (see cuda_backend.h): opening a step, capturing or replaying it at
// its Download, and steps launched ahead of the host (DownloadLater / TakeDownload: two in
// flight over two pinned host areas), with their timing (Options::time_graph_steps).
#include <algorithm>
#include <cstring>

#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {

Status CudaBackend::BeginGraph(const std::string& key, int table_blocks) {
  const bool eager_since_graph = eager_since_graph_;  // Activate sets it
  Activate();
  if (in_graph()) {
    return FailedPreconditionError("cuda backend: graph step '" + graph_key_ +
                                   "' has not ended (no Download yet)");
  }
  if (table_blocks <= 0) return InvalidArgumentError("cuda backend: table_blocks must be > 0");
  if (launched_.size() >= kMaxDownloadsLater) {
    return FailedPreconditionError("cuda backend: " + std::to_string(launched_.size()) +
                                   " graph steps launched ahead and not taken (TakeDownload)");
  }
  if (launched_.empty() || eager_since_graph) {
    SPARK_RETURN_IF_ERROR(Synchronize());  // eager work done: staging and arena are free
  } else {
    // Only graph steps are queued: they copied their inputs from the other host area, and
    // this step's kernels follow theirs on the stream.
    SPARK_RETURN_IF_ERROR(status_);
  }
  eager_since_graph_ = eager_since_graph;
  // A step launched ahead still has its inputs and output in one host area: take the other.
  parity_ = launched_.empty() ? 0 : 1 - launched_.back().parity;
  graph_key_ = key + "/t" + std::to_string(table_blocks) + (parity_ == 0 ? "" : "/p1");
  graph_table_blocks_ = table_blocks;
  graph_ops_ = 0;
  arena_chunk_ = arena_used_ = 0;
  ResetStaging();
  if (graphs_.count(graph_key_) > 0) {
    mode_ = Mode::kReplay;
    return Status::Ok();
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  mode_ = Mode::kCapture;
  return Status::Ok();
}

void CudaBackend::CancelDecodeGraph() {
  if (!in_graph()) return;
  Activate();
  if (mode_ == Mode::kCapture) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  mode_ = Mode::kEager;
  ResetStaging();
}

Status CudaBackend::AddStepTime(int slot, bool after_graph) {
  float ms = 0;
  SPARK_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, step_begin_[slot], step_end_[slot]));
  step_times_.gpu_ms += ms;
  ++step_times_.steps;
  if (after_graph) {
    const int before = (slot + kTimedSlots - 1) % kTimedSlots;
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, step_end_[before], step_begin_[slot]));
    step_times_.gap_ms += ms;
    ++step_times_.gaps;
  }
  return Status::Ok();
}

Result<CudaBackend::Launched> CudaBackend::LaunchGraph(const float* src, size_t bytes) {
  const Mode mode = mode_;
  mode_ = Mode::kEager;
  char* out_host = graph_out_host_ + parity_ * graph_out_bytes_;
  if (mode == Mode::kCapture) {
    Status captured = status_;
    if (captured.ok() && bytes > graph_out_bytes_) {
      captured = InvalidArgumentError("cuda backend: a graph step's output is limited to " +
                                      std::to_string(graph_out_bytes_) + " bytes");
    }
    if (captured.ok()) {
      const cudaError_t e = cudaMemcpyAsync(out_host, src, bytes, cudaMemcpyDeviceToHost, stream_);
      if (e != cudaSuccess)
        captured = InternalError(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(e));
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    SPARK_RETURN_IF_ERROR(captured);
    SPARK_CUDA_RETURN_IF_ERROR(end);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    SPARK_CUDA_RETURN_IF_ERROR(inst);
    graphs_[graph_key_] = {exec, bytes, graph_ops_, staging_used_, arena_chunk_, arena_used_};
  }
  const CapturedGraph& g = graphs_.at(graph_key_);
  if (g.out_bytes != bytes || g.ops != graph_ops_ || g.staged != staging_used_ ||
      g.arena_chunk != arena_chunk_ || g.arena_used != arena_used_) {
    const Status refused = InternalError(
        "cuda backend: graph step '" + graph_key_ + "' ran " + std::to_string(graph_ops_) +
        " ops staging " + std::to_string(staging_used_) + " bytes and downloading " +
        std::to_string(bytes) + ", but was captured with " + std::to_string(g.ops) + ", " +
        std::to_string(g.staged) + " and " + std::to_string(g.out_bytes) +
        " (or other workspace): a key must name one op sequence; not launched");
    ResetStaging();
    return refused;
  }
  cudaGraphExec_t exec = g.exec;
  Launched step{parity_, -1, !eager_since_graph_, bytes};
  if (options_.time_graph_steps) {
    step.timed_slot = static_cast<int>(steps_launched_ % kTimedSlots);
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_begin_[step.timed_slot], stream_));
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream_));
  if (step.timed_slot >= 0) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_end_[step.timed_slot], stream_));
  }
  SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_done_[parity_], stream_));
  // The staged inputs stay in their host area until the graph has copied them; the next step
  // stages into the other one (or waits, when eager).
  ResetStaging();
  ++steps_launched_;
  eager_since_graph_ = false;
  return step;
}

Status CudaBackend::FinishLaunched(const Launched& step, std::span<float> host) {
  SPARK_RETURN_IF_ERROR(WaitStream(options_.step_timeout, step_done_[step.parity]));
  if (step.timed_slot >= 0) {
    SPARK_RETURN_IF_ERROR(AddStepTime(step.timed_slot, step.after_graph));
  }
  std::memcpy(host.data(), graph_out_host_ + step.parity * graph_out_bytes_, step.bytes);
  return status_;
}

Status CudaBackend::FinishGraph(const float* src, std::span<float> host) {
  SPARK_ASSIGN_OR_RETURN(const Launched step, LaunchGraph(src, host.size_bytes()));
  return FinishLaunched(step, host);
}

Status CudaBackend::DownloadLater(const float* src, size_t count) {
  Activate();
  if (launched_.size() >= kMaxDownloadsLater) {
    return FailedPreconditionError("cuda backend: " + std::to_string(launched_.size()) +
                                   " downloads queued already (TakeDownload first)");
  }
  if (!in_graph()) {  // eager: the work is queued already; download it now
    Launched step{0, -1, false, count * sizeof(float), std::vector<float>(count)};
    Download(src, *step.ready);
    SPARK_RETURN_IF_ERROR(status_);
    launched_.push_back(std::move(step));
    return Status::Ok();
  }
  SPARK_ASSIGN_OR_RETURN(Launched step, LaunchGraph(src, count * sizeof(float)));
  launched_.push_back(std::move(step));
  return Status::Ok();
}

Status CudaBackend::TakeDownload(std::span<float> host) {
  cudaSetDevice(options_.device);  // not Activate: taking a result is no eager work
  if (launched_.empty()) {
    return FailedPreconditionError("cuda backend: no download queued to take");
  }
  const Launched& step = launched_.front();
  if (host.size_bytes() != step.bytes) {
    return InvalidArgumentError("cuda backend: the queued download holds " +
                                std::to_string(step.bytes / sizeof(float)) + " floats, not " +
                                std::to_string(host.size()));
  }
  Status s = Status::Ok();
  if (step.ready) {
    std::copy(step.ready->begin(), step.ready->end(), host.begin());
  } else {
    s = FinishLaunched(step, host);
  }
  launched_.pop_front();
  return s;
}

}  // namespace spark::engine::backend::cuda
