// CudaBackend's start-up, transfers, staging, graph-step plumbing and the small ops (see
// cuda_backend.h for the others' files).
#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "engine/core/dtype.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemv.h"
#include "kernels/launch_settings.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"

namespace spark::engine::backend::cuda {
namespace {

using internal::Bf16;
using internal::kMaxLocalExperts;
using internal::WithCache;

constexpr size_t kInitialStaging = 4 << 20;

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const Options& options) {
  const int count = kernels::CudaDeviceCount();
  if (options.device < 0 || options.device >= count) {
    return UnavailableError("cuda backend: device " + std::to_string(options.device) +
                            " does not exist (this machine has " + std::to_string(count) +
                            " CUDA devices); use --backend cpu or run one rank per GPU");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  SPARK_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&b->sm_count_, cudaDevAttrMultiProcessorCount, options.device));
  SPARK_ASSIGN_OR_RETURN(b->gemm_, kernels::Gemm::Create({.allow_tf32 = options.allow_tf32}));
  SPARK_RETURN_IF_ERROR(b->memory_.Init(kInitialStaging));
  SPARK_RETURN_IF_ERROR(b->graph_.Init(b->stream_, options.time_graph_steps));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->counts_host_, kMaxLocalExperts * sizeof(int32_t)));
  return b;
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(options_.device);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  weight_staging_.reset();
  inv_freq_.clear();
  gemm_.reset();
  if (counts_host_ != nullptr) cudaFreeHost(counts_host_);
  graph_.DropAll();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::Activate() {
  cudaSetDevice(options_.device);
  graph_.NoteOp();
}

void CudaBackend::Record(const Status& s) {
  if (s.ok() || !status_.ok()) return;
  status_ = s;
  Logger("engine.cuda")->error("cuda backend: {}", s.message());
}

Status CudaBackend::WaitStream() {
  const auto deadline = std::chrono::steady_clock::now() + options_.step_timeout;
  while (true) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) SPARK_CUDA_RETURN_IF_ERROR(e);
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceededError("cuda backend: device " + std::to_string(options_.device) +
                                   " still busy after " +
                                   std::to_string(options_.step_timeout.count()) +
                                   " ms (a peer rank stopped in a collective?)");
    }
    std::this_thread::yield();
  }
}

Status CudaBackend::Synchronize() {
  Activate();
  if (in_graph()) {
    return FailedPreconditionError("cuda backend: Synchronize inside graph step '" +
                                   graph_.key() + "' (a graph step ends at its Download)");
  }
  SPARK_RETURN_IF_ERROR(WaitStream());
  ResetStaging();
  return status_;
}

void CudaBackend::ResetStaging() {
  memory_.ResetStaging();
  attention_packed_.clear();
  attention_device_ = nullptr;
}

Result<void*> CudaBackend::StageShared(const void* host, size_t bytes) {
  if (const void* d = memory_.FindStaged(host, bytes, graph_.area())) return const_cast<void*>(d);
  return Stage(host, bytes, /*shared=*/true);
}

Status CudaBackend::ReserveStaging(size_t bytes) {
  if (memory_.StagingFits(bytes)) return Status::Ok();
  if (in_graph()) {
    return FailedPreconditionError("cuda backend: graph step '" + graph_.key() +
                                   "' stages more than " +
                                   std::to_string(memory_.staging_bytes()) + " bytes of inputs");
  }
  // Everything staged so far may still be read by queued work: wait, then start over.
  SPARK_RETURN_IF_ERROR(WaitStream());
  ResetStaging();
  if (!memory_.StagingFits(bytes)) {
    graph_.DropAll();  // the captured graphs copy from the old areas
    SPARK_RETURN_IF_ERROR(memory_.GrowStaging(bytes));
  }
  return Status::Ok();
}

Result<void*> CudaBackend::Stage(const void* host, size_t bytes, bool shared) {
  if (in_graph() && !memory_.StagingFits(bytes)) {
    return FailedPreconditionError("cuda backend: graph step '" + graph_.key() +
                                   "' stages more than " +
                                   std::to_string(memory_.staging_bytes()) + " bytes of inputs");
  }
  if (!in_graph() && graph_.launched_any()) {
    // A step launched ahead may not have copied its inputs (the same host area) yet.
    SPARK_RETURN_IF_ERROR(WaitStream());
  }
  if (!memory_.StagingFits(bytes)) {
    // Everything staged so far may still be read by queued work: wait, then start over.
    SPARK_RETURN_IF_ERROR(WaitStream());
    ResetStaging();
    if (!memory_.StagingFits(bytes)) {
      // The captured graphs copy from the old areas: they go, and steps capture anew.
      graph_.DropAll();
      SPARK_RETURN_IF_ERROR(memory_.GrowStaging(bytes));
    }
  }
  return memory_.Stage(host, bytes, graph_.area(), launching(), shared, stream_);
}

Result<Buffer> CudaBackend::Scratch(size_t bytes, DType dtype) {
  if (bytes == 0) return Buffer();
  const size_t count = (bytes + DTypeBytes(dtype) - 1) / DTypeBytes(dtype);
  if (in_graph()) {  // the arena outlives the step: nothing to free
    SPARK_ASSIGN_OR_RETURN(void* p, memory_.ArenaAllocate(bytes, graph_.capturing()));
    return Buffer(p, count, dtype, [](float*) {});
  }
  return memory_.AllocatorBuffer(bytes, count, dtype);
}

Result<Buffer> CudaBackend::Allocate(size_t count) {
  if (count == 0) return Buffer();
  Activate();
  SPARK_ASSIGN_OR_RETURN(Buffer b, Scratch(count * sizeof(float)));
  if (launching()) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.raw(), 0, count * sizeof(float), stream_));
  }
  return b;
}

void CudaBackend::Upload(std::span<const float> host, float* dst) {
  Activate();
  Status s = [&]() -> Status {
    if (in_graph()) return FailedPreconditionError("cuda backend: Upload inside a graph step");
    SPARK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
    SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }();
  Record(s);
}

void CudaBackend::Download(const float* src, std::span<float> host) {
  Activate();
  Status s = [&]() -> Status {
    if (in_graph()) return FinishGraph(src, host);
    SPARK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host.data(), src, host.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    SPARK_RETURN_IF_ERROR(WaitStream());
    ResetStaging();
    return Status::Ok();
  }();
  Record(s);
  if (!status_.ok()) {
    Logger("engine.cuda")
        ->error("download after a failed op; results are not valid: {}", status_.message());
  }
}

Result<Buffer> CudaBackend::AllocateWeights(size_t count, DType dtype) {
  if (dtype == DType::kF32 || count == 0) return Allocate(count);
  Activate();
  SPARK_ASSIGN_OR_RETURN(Buffer b, Scratch(count * DTypeBytes(dtype), dtype));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.raw(), 0, count * DTypeBytes(dtype), stream_));
  return b;
}

void CudaBackend::UploadWeights(std::span<const float> host, Buffer& dst) {
  if (dst.dtype() == DType::kF32) return Upload(host, dst.data());
  Activate();
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = core::FloatToBf16(host[i]);
  Status s = [&]() -> Status {
    SPARK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.raw(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, stream_));
    SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }();
  Record(s);
}

Status CudaBackend::UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) {
  SPARK_RETURN_IF_ERROR(CheckWeightBytesFit(src, dst, dst_offset));
  Activate();
  if (!weight_staging_) weight_staging_ = std::make_unique<WeightStaging>();
  Status s = weight_staging_->Copy(src, static_cast<uint8_t*>(dst.raw()) + dst_offset, stream_);
  Record(s);
  return s;
}

Status CudaBackend::FinishWeightUploads() {
  if (weight_staging_) {
    Activate();
    Record(weight_staging_->Finish(stream_));  // kept: see weight_staging.h
  }
  return status_;
}

bool CudaBackend::Bf16InputsPay(int64_t rows, DType weights) const {
  if (IsQuantised(weights)) return true;
  if (weights == DType::kF32) return false;
  const int gemv_rows = weights == DType::kBF16 ? kernels::GetLaunchSettings().gemv_max_rows
                                                : kernels::kGemvMaxRows;
  return rows > gemv_rows;
}

Status CudaBackend::BeginGraph(const std::string& key, int table_blocks) {
  const bool eager_since = graph_.eager_since_graph();  // Activate notes this call as eager work
  Activate();
  SPARK_RETURN_IF_ERROR(graph_.CheckCanBegin(table_blocks));
  if (graph_.NeedsSync(eager_since)) {
    SPARK_RETURN_IF_ERROR(Synchronize());  // eager work done: staging and arena are free
  } else {
    // Only graph steps are queued: they copied their inputs from the other host area, and this
    // step's kernels follow theirs on the stream.
    SPARK_RETURN_IF_ERROR(status_);
  }
  memory_.RewindArena();
  ResetStaging();
  return graph_.Begin(key, table_blocks, eager_since);
}

void CudaBackend::CancelDecodeGraph() {
  if (!in_graph()) return;
  Activate();
  graph_.Cancel();
  ResetStaging();
}

Result<GraphSteps::Launched> CudaBackend::LaunchGraph(const float* src, size_t bytes) {
  Result<GraphSteps::Launched> step =
      graph_.Launch(src, bytes, status_, {0, memory_.staging_used(), memory_.arena_mark()});
  // The staged inputs stay in their host area until the graph has copied them; the next step
  // stages into the other one (or waits, when eager).
  ResetStaging();
  return step;
}

Status CudaBackend::FinishGraph(const float* src, std::span<float> host) {
  SPARK_ASSIGN_OR_RETURN(const GraphSteps::Launched step, LaunchGraph(src, host.size_bytes()));
  SPARK_RETURN_IF_ERROR(graph_.Finish(step, host));
  return status_;
}

Status CudaBackend::DownloadLater(const float* src, size_t count) {
  Activate();
  if (graph_.launched_count() >= kMaxDownloadsLater) {
    return FailedPreconditionError("cuda backend: " + std::to_string(graph_.launched_count()) +
                                   " downloads queued already (TakeDownload first)");
  }
  if (!in_graph()) {  // eager: the work is queued already; download it now
    GraphSteps::Launched step{0, -1, false, count * sizeof(float), std::vector<float>(count)};
    Download(src, *step.ready);
    SPARK_RETURN_IF_ERROR(status_);
    graph_.Push(std::move(step));
    return Status::Ok();
  }
  SPARK_ASSIGN_OR_RETURN(GraphSteps::Launched step, LaunchGraph(src, count * sizeof(float)));
  graph_.Push(std::move(step));
  return Status::Ok();
}

Status CudaBackend::TakeDownload(std::span<float> host) {
  cudaSetDevice(options_.device);  // not Activate: taking a result is no eager work
  if (!graph_.launched_any()) {
    return FailedPreconditionError("cuda backend: no download queued to take");
  }
  if (host.size_bytes() != graph_.front().bytes) {
    return InvalidArgumentError("cuda backend: the queued download holds " +
                                std::to_string(graph_.front().bytes / sizeof(float)) +
                                " floats, not " + std::to_string(host.size()));
  }
  const GraphSteps::Launched step = graph_.Pop();
  if (step.ready) {
    std::copy(step.ready->begin(), step.ready->end(), host.begin());
    return Status::Ok();
  }
  SPARK_RETURN_IF_ERROR(graph_.Finish(step, host));
  return status_;
}

void CudaBackend::Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                            std::span<const int32_t> ids, float* out) {
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_ids, Stage(ids));
    if (!launching()) return Status::Ok();
    return kernels::Embedding(table, row_begin, rows, hidden, d_ids,
                              static_cast<int64_t>(ids.size()), out, stream_);
  }();
  Record(s);
}

void CudaBackend::EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                                    const float* pairs, int parts, int64_t tokens, float* out) {
  Activate();
  if (!launching()) return;
  Record(kernels::EmbeddingOfArgMax(table, row_begin, rows, hidden, pairs, parts, tokens, out,
                                    stream_));
}

void CudaBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
                          Output out) {
  Activate();
  if (!launching()) return;
  Record(kernels::RmsNorm<float>(x, nullptr, weight, rows, dim, eps, out.data, stream_, Bf16(out)));
}

void CudaBackend::AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows,
                             int dim, float eps, Output out) {
  Activate();
  if (!launching()) return;
  // kernels::RmsNorm's residual form: residual (h) += x (delta), out = norm(residual).
  Record(kernels::RmsNorm<float>(delta, h, weight, rows, dim, eps, out.data, stream_, Bf16(out)));
}

void CudaBackend::ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) {
  Activate();
  if (!launching()) return;
  Record(kernels::ArgMaxPairs(x, rows, cols, index_offset, out, stream_));
}

void CudaBackend::Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                       double theta) {
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const float* inv_freq, InvFreq(head_dim, theta));
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_pos, Stage(positions));
    if (!launching()) return Status::Ok();
    return kernels::Rope<float>(x, d_pos, static_cast<int64_t>(positions.size()), heads, head_dim,
                                inv_freq, 1.0f, stream_);
  }();
  Record(s);
}

void CudaBackend::Add(float* x, const float* y, size_t count) {
  Activate();
  if (!launching()) return;
  Record(kernels::Add<float>(x, y, count, stream_));
}

void CudaBackend::SiluMul(const float* gate_up, int64_t rows, int inter, Output out) {
  Activate();
  if (!launching()) return;
  Record(kernels::SiluMul<float>(gate_up, rows, inter, out.data, stream_, Bf16(out)));
}

void CudaBackend::SplitColumns(const float* src, int64_t rows,
                               std::span<const ColumnSlice> parts) {
  Activate();
  if (parts.size() > static_cast<size_t>(kernels::kMaxColumnParts)) {
    return Record(InvalidArgumentError("cuda backend: SplitColumns takes at most " +
                                       std::to_string(kernels::kMaxColumnParts) + " parts, not " +
                                       std::to_string(parts.size())));
  }
  if (!launching()) return;
  kernels::ColumnParts kp;
  for (const ColumnSlice& part : parts) {
    kp.out[kp.count] = part.out;
    kp.n[kp.count++] = part.width;
  }
  Record(kernels::SplitColumns(src, rows, kp, stream_));
}

void CudaBackend::WriteKv(const float* k, const float* v, std::span<const int64_t> slots,
                          int kv_width, const KvCacheRef& cache) {
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, Stage(slots));
    if (!launching()) return Status::Ok();
    return WithCache(cache, [&](auto* k_cache, auto* v_cache) {
      return kernels::WriteKv(k, v, d_slots, static_cast<int64_t>(slots.size()), kv_width, k_cache,
                              v_cache, stream_);
    });
  }();
  Record(s);
}

}  // namespace spark::engine::backend::cuda
