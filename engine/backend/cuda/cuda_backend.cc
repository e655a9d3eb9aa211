#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "engine/core/dtype.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemv.h"
#include "kernels/moe.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"

namespace spark::engine::backend::cuda {
namespace {

constexpr size_t kInitialStaging = 4 << 20;
constexpr size_t kMaxLocalExperts = 4096;
constexpr size_t kGraphOutBytes = 4 << 20;
constexpr size_t kArenaChunk = 64 << 20;

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

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
  b->staging_bytes_ = kInitialStaging;
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->staging_host_, 2 * b->staging_bytes_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->staging_device_, b->staging_bytes_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->counts_host_, kMaxLocalExperts * sizeof(int32_t)));
  b->graph_out_bytes_ = kGraphOutBytes;
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->graph_out_host_, 2 * b->graph_out_bytes_));
  for (cudaEvent_t& e : b->step_done_) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  if (options.time_graph_steps) {
    for (int i = 0; i < kTimedSlots; ++i) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b->step_begin_[i]));
      SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b->step_end_[i]));
    }
  }
  return b;
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(options_.device);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  inv_freq_.clear();
  gemm_.reset();
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
  if (staging_device_ != nullptr) cudaFree(staging_device_);
  if (counts_host_ != nullptr) cudaFreeHost(counts_host_);
  if (graph_out_host_ != nullptr) cudaFreeHost(graph_out_host_);
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
  for (auto& [chunk, bytes] : arena_) cudaFree(chunk);
  for (int i = 0; i < kTimedSlots; ++i) {
    if (step_begin_[i] != nullptr) cudaEventDestroy(step_begin_[i]);
    if (step_end_[i] != nullptr) cudaEventDestroy(step_end_[i]);
  }
  for (cudaEvent_t e : step_done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::Activate(bool keep_bf16_copy, bool keep_split) {
  cudaSetDevice(options_.device);
  if (mode_ == Mode::kEager) eager_since_graph_ = true;
  if (in_graph()) ++graph_ops_;
  RunPendingReduce();
  RunPendingAdd();
  if (!keep_bf16_copy) bf16_copy_ = {};
  if (!keep_split) RunPendingSplit();
}

void CudaBackend::RunPendingSplit() {
  if (pending_split_.stacked.raw() == nullptr) return;
  if (launching()) {
    Record(kernels::SplitColumns(pending_split_.stacked.data(), pending_split_.rows,
                                 pending_split_.parts, stream_));
  }
  pending_split_ = {};
}

Result<__nv_bfloat16*> CudaBackend::MakeBf16Copy(const float* of, int64_t rows, size_t count) {
  bf16_copy_ = {};
  if (!bf16_weights_ || rows <= kernels::kGemvMaxRows || count == 0) return nullptr;
  SPARK_ASSIGN_OR_RETURN(Buffer b, Scratch(count * 2, DType::kBF16));
  bf16_copy_ = {of, count, std::move(b)};
  return static_cast<__nv_bfloat16*>(bf16_copy_.data.raw());
}

const __nv_bfloat16* CudaBackend::Bf16CopyOf(const float* x, size_t count) const {
  if (bf16_copy_.of != x || bf16_copy_.count != count) return nullptr;
  return static_cast<const __nv_bfloat16*>(bf16_copy_.data.raw());
}

void CudaBackend::ForgetBf16CopyIfWritten(const float* p, size_t count) {
  if (bf16_copy_.of != nullptr && p < bf16_copy_.of + bf16_copy_.count &&
      bf16_copy_.of < p + count) {
    bf16_copy_ = {};
  }
}

void CudaBackend::Record(const Status& s) {
  if (s.ok() || !status_.ok()) return;
  status_ = s;
  Logger("engine.cuda")->error("cuda backend: {}", s.message());
}

Status CudaBackend::Synchronize() {
  Activate();
  if (in_graph()) {
    return FailedPreconditionError("cuda backend: Synchronize inside graph step '" + graph_key_ +
                                   "' (a graph step ends at its Download)");
  }
  SPARK_RETURN_IF_ERROR(WaitStream(options_.step_timeout));
  ResetStaging();
  return status_;
}

void CudaBackend::ResetStaging() {
  staging_used_ = 0;
  staged_.clear();
  attention_packed_.clear();
  attention_device_ = nullptr;
}

Result<void*> CudaBackend::StageShared(const void* host, size_t bytes) {
  for (const Staged& st : staged_) {
    if (st.host == host && st.bytes == bytes &&
        (bytes == 0 || std::memcmp(StagingHost() + st.offset, host, bytes) == 0)) {
      return staging_device_ + st.offset;
    }
  }
  SPARK_ASSIGN_OR_RETURN(void* d, Stage(host, bytes));
  staged_.push_back({host, bytes, static_cast<size_t>(static_cast<char*>(d) - staging_device_)});
  return d;
}

Result<void*> CudaBackend::Stage(const void* host, size_t bytes) {
  const size_t need = Align256(std::max<size_t>(bytes, 1));
  if (in_graph() && staging_used_ + need > staging_bytes_) {
    return FailedPreconditionError("cuda backend: graph step '" + graph_key_ +
                                   "' stages more than " + std::to_string(staging_bytes_) +
                                   " bytes of inputs");
  }
  if (!in_graph() && !launched_.empty()) {
    // A step launched ahead may not have copied its inputs (the same host area) yet.
    SPARK_RETURN_IF_ERROR(WaitStream(options_.step_timeout));
  }
  if (staging_used_ + need > staging_bytes_) {
    // Everything staged so far may still be read by queued work: wait, then start over.
    SPARK_RETURN_IF_ERROR(WaitStream(options_.step_timeout));
    ResetStaging();
    if (need > staging_bytes_) {
      // The captured graphs copy from the old areas: they go, and steps capture anew.
      for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
      graphs_.clear();
      cudaFreeHost(staging_host_);
      cudaFree(staging_device_);
      staging_host_ = staging_device_ = nullptr;
      staging_bytes_ = std::max(need, 2 * staging_bytes_);
      SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&staging_host_, 2 * staging_bytes_));
      SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging_device_, staging_bytes_));
    }
  }
  char* h = StagingHost() + staging_used_;
  char* d = staging_device_ + staging_used_;
  staging_used_ += need;
  if (bytes > 0) {
    std::memcpy(h, host, bytes);
    if (launching()) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
    }
  }
  return d;
}

Result<Buffer> CudaBackend::Scratch(size_t bytes, DType dtype) {
  if (bytes == 0) return Buffer();
  const size_t count = (bytes + DTypeBytes(dtype) - 1) / DTypeBytes(dtype);
  if (in_graph()) {  // the arena outlives the step: nothing to free
    SPARK_ASSIGN_OR_RETURN(void* p, ArenaAllocate(bytes));
    return Buffer(p, count, dtype, [](float*) {});
  }
  SPARK_ASSIGN_OR_RETURN(void* p, allocator_.Allocate(bytes));
  DeviceAllocator* allocator = &allocator_;
  return Buffer(p, count, dtype, [allocator](float* f) { allocator->Free(f); });
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
    SPARK_RETURN_IF_ERROR(WaitStream(options_.step_timeout));
    ResetStaging();
    return Status::Ok();
  }();
  Record(s);
  if (!status_.ok()) {
    Logger("engine.cuda")
        ->error("download after a failed op; results are not valid: {}", status_.message());
  }
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

void CudaBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
                          float* out) {
  if (out != x) {
    // A LinearAdd into x left pending (tensor-core shapes): the add and the norm in one kernel.
    const PendingAdd add = TakePendingAdd(x, static_cast<size_t>(rows) * dim);
    if (add.h != nullptr) return AddRmsNorm(add.h, add.delta, weight, rows, dim, eps, out);
  }
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(__nv_bfloat16 * copy, MakeBf16Copy(out, rows, size_t(rows) * dim));
    if (!launching()) return Status::Ok();
    return kernels::RmsNorm<float>(x, nullptr, weight, rows, dim, eps, out, stream_, copy);
  }();
  Record(s);
}

Result<Buffer> CudaBackend::AllocateWeights(size_t count, DType dtype) {
  if (dtype == DType::kF32 || count == 0) return Allocate(count);
  Activate();
  bf16_weights_ = bf16_weights_ || dtype == DType::kBF16;
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

void CudaBackend::Linear(const float* x, int64_t rows, int in_features, WeightRef w,
                         int out_features, float* out) {
  Activate(/*keep_bf16_copy=*/true);
  Record(LinearImpl(x, rows, in_features, w, out_features, out));
  ForgetBf16CopyIfWritten(out, size_t(rows) * out_features);
}

Status CudaBackend::LinearImpl(const float* x, int64_t rows, int in_features, WeightRef w,
                               int out_features, float* out) {
  using kernels::GemmType;
  if (w.dtype == DType::kFP8) return LinearFp8(x, rows, in_features, w, out_features, out);
  if (w.dtype == DType::kF32) {
    if (!launching()) return Status::Ok();
    return gemm_->Run(GemmType::kF32, GemmType::kF32, x, rows, in_features, w.data, out_features,
                      out, stream_);
  }
  const auto* wb = static_cast<const __nv_bfloat16*>(w.data);
  if (rows <= kernels::kGemvMaxRows && in_features % 8 == 0) {
    if (!launching()) return Status::Ok();
    return kernels::GemvBf16(x, rows, in_features, wb, out_features, out, stream_);
  }
  // Tensor cores: the activations rounded to bf16 (by the op that wrote them, or here), fp32
  // accumulation and output.
  const size_t count = static_cast<size_t>(rows) * in_features;
  if (const __nv_bfloat16* copy = Bf16CopyOf(x, count)) {
    if (!launching()) return Status::Ok();
    return gemm_->Run(GemmType::kBF16, GemmType::kF32, copy, rows, in_features, wb, out_features,
                      out, stream_);
  }
  SPARK_ASSIGN_OR_RETURN(Buffer xb, Scratch(count * 2));
  if (!launching()) return Status::Ok();
  auto* xh = reinterpret_cast<__nv_bfloat16*>(xb.data());
  SPARK_RETURN_IF_ERROR(kernels::CastF32ToBf16(x, count, xh, stream_));
  return gemm_->Run(GemmType::kBF16, GemmType::kF32, xh, rows, in_features, wb, out_features, out,
                    stream_);
}

void CudaBackend::LinearMany(const float* x, int64_t rows, int in_features,
                             std::span<const LinearOut> outs) {
  Activate(/*keep_bf16_copy=*/true);
  LinearManyImpl(x, rows, in_features, outs);
  for (const LinearOut& o : outs) ForgetBf16CopyIfWritten(o.out, size_t(rows) * o.out_features);
}

void CudaBackend::LinearManyImpl(const float* x, int64_t rows, int in_features,
                                 std::span<const LinearOut> outs) {
  bool bf16 = true, stacked = outs.size() <= static_cast<size_t>(kernels::kMaxColumnParts);
  int total = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    bf16 = bf16 && outs[i].w.dtype == DType::kBF16;
    // Stacked: each weight starts where the one before ends (Qwen3's q/k/v views of one matrix).
    stacked = stacked && (i == 0 || static_cast<const char*>(outs[i].w.data) ==
                                        static_cast<const char*>(outs[i - 1].w.data) +
                                            size_t{2} * outs[i - 1].out_features * in_features);
    total += outs[i].out_features;
  }
  bool fp8 = !outs.empty(), fp8_gemv = true;
  for (const LinearOut& o : outs) {
    fp8 = fp8 && o.w.dtype == DType::kFP8;
    fp8_gemv = fp8 && fp8_gemv && UseFp8Gemv(rows, o.out_features, in_features);
  }
  const bool one_launch = ((bf16 && in_features % 8 == 0) || fp8_gemv) &&
                          rows <= kernels::kGemvMaxRows &&
                          outs.size() <= static_cast<size_t>(kernels::kGemvMaxSegments);
  if (bf16 && stacked && !one_launch && !outs.empty()) {
    // One GEMM over the stacked weights (cuBLASLt streams skinny shapes well only when n is
    // wide), then each output's columns out of the result: a split the next op enqueues, or
    // folds into itself (QkNormRopeWriteKv). Decided the same way in a replay's host pass.
    Status s = [&]() -> Status {
      SPARK_ASSIGN_OR_RETURN(Buffer all, Scratch(static_cast<size_t>(rows) * total * 4));
      SPARK_RETURN_IF_ERROR(LinearImpl(x, rows, in_features, outs[0].w, total, all.data()));
      kernels::ColumnParts parts;
      for (const LinearOut& o : outs) {
        parts.out[parts.count] = o.out;
        parts.n[parts.count++] = o.out_features;
      }
      pending_split_ = {std::move(all), rows, total, parts};
      return Status::Ok();
    }();
    Record(s);
    return;
  }
  if (fp8 && !one_launch &&
      std::all_of(outs.begin(), outs.end(), [&](const LinearOut& o) {
        return HasFp8Gemm(rows, o.out_features, in_features);
      })) {
    Record(Fp8Gemms(x, rows, in_features, outs));
    return;
  }
  if (!one_launch) return Backend::LinearMany(x, rows, in_features, outs);
  if (!launching()) return;
  kernels::GemvSegments segs;
  for (const LinearOut& o : outs) {
    segs.w[segs.count] = o.w.data;
    if (fp8) segs.scales[segs.count] = Fp8Scales(o.w.data, size_t(o.out_features) * in_features);
    segs.out[segs.count] = o.out;
    segs.n[segs.count++] = o.out_features;
  }
  Record(fp8 ? kernels::GemvFp8Many(x, rows, in_features, segs, stream_)
             : kernels::GemvBf16Many(x, rows, in_features, segs, stream_));
}

void CudaBackend::LinearSiluMul(const float* x, int64_t rows, int in_features, WeightRef w,
                                int inter, float* gate_up, float* act) {
  const bool fp8 = w.dtype == DType::kFP8;
  if (!ByGemv(rows, 2 * inter, in_features, w.dtype)) {
    return Backend::LinearSiluMul(x, rows, in_features, w, inter, gate_up, act);  // Linear, SiluMul
  }
  Activate();
  if (!launching()) return;
  if (fp8) {
    const auto* codes = static_cast<const uint8_t*>(w.data);
    const float* scales = Fp8Scales(w.data, size_t(2) * inter * in_features);
    Record(kernels::GemvFp8SiluMul(x, rows, in_features, codes, scales, inter, act, stream_));
    return;
  }
  Record(kernels::GemvBf16SiluMul(x, rows, in_features, static_cast<const __nv_bfloat16*>(w.data),
                                  inter, act, stream_));
}

void CudaBackend::AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows,
                             int dim, float eps, float* out) {
  // A peer all-reduce of exactly delta left pending: the sum, the add and the norm in one kernel.
  const bool reduce =
      options_.fuse_all_reduce_norm && pending_reduce_.data == delta &&
      pending_reduce_.count == static_cast<size_t>(rows) * dim &&
      kernels::PeerAddRmsNormFits(*pending_reduce_.args, delta, rows, dim, h, weight, out, nullptr);
  const PendingReduce taken = reduce ? std::exchange(pending_reduce_, {}) : PendingReduce{};
  fused_reduce_norms_ += reduce ? 1 : 0;
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(__nv_bfloat16 * copy, MakeBf16Copy(out, rows, size_t(rows) * dim));
    if (!launching()) return Status::Ok();
    if (taken.args != nullptr) {
      return kernels::PeerAllReduceAddRmsNorm(*taken.args, taken.data, rows, dim, h, weight, eps,
                                              out, copy, stream_);
    }
    // kernels::RmsNorm's residual form: residual (h) += x (delta), out = norm(residual).
    return kernels::RmsNorm<float>(delta, h, weight, rows, dim, eps, out, stream_, copy);
  }();
  Record(s);
}

void CudaBackend::QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                                    std::span<const int64_t> slots) {
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) {
    return Backend::QkNormRopeWriteKv(a, positions, slots);
  }
  Activate(/*keep_bf16_copy=*/false, /*keep_split=*/true);
  Status s = [&]() -> Status {
    // First the RoPE table (built by an allocation, which runs a pending split) and staging.
    SPARK_ASSIGN_OR_RETURN(const float* inv_freq, InvFreq(a.head_dim, a.theta));
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_pos, Stage(positions));
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, Stage(slots));
    // A pending split of a LinearMany that wrote exactly these q, k and v: take its stacked
    // rows over (freed after the kernel, in stream order); any other pending split runs now.
    const PendingSplit& p = pending_split_;
    const bool fold =
        p.stacked.raw() != nullptr && p.parts.count == 3 && p.parts.out[0] == a.q &&
        p.parts.out[1] == a.k && p.parts.out[2] == a.v && p.parts.n[0] == a.heads * a.head_dim &&
        p.parts.n[1] == a.kv_heads * a.head_dim && p.parts.n[2] == a.kv_heads * a.head_dim &&
        p.rows == static_cast<int64_t>(positions.size());
    if (!fold) RunPendingSplit();
    const PendingSplit taken = std::exchange(pending_split_, {});
    if (!launching()) return Status::Ok();
    kernels::QkvHeads heads{a.q,      a.k,        a.v,       a.q_norm,
                            a.k_norm, a.cache.k,  a.cache.v, a.cache.dtype == DType::kBF16,
                            a.heads,  a.kv_heads, a.head_dim};
    if (fold) {
      heads.src = taken.stacked.data();
      heads.src_stride = taken.total;
      heads.v_out = taken.parts.out[2];
    }
    return kernels::QkNormRopeWriteKv(heads, d_pos, d_slots, static_cast<int64_t>(positions.size()),
                                      a.eps, inv_freq, stream_);
  }();
  Record(s);
  RunPendingSplit();  // an error above may have left it pending
}

void CudaBackend::ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) {
  Activate();
  if (!launching()) return;
  Record(kernels::ArgMaxPairs(x, rows, cols, index_offset, out, stream_));
}

Result<const float*> CudaBackend::InvFreq(int head_dim, double theta) {
  const auto key = std::make_pair(head_dim, theta);
  auto it = inv_freq_.find(key);
  if (it == inv_freq_.end()) {
    if (in_graph()) {
      return FailedPreconditionError(
          "cuda backend: RoPE table built inside a graph step; run one eager step first");
    }
    const kernels::RopeTable table = kernels::RopeInvFreq(head_dim, theta);
    SPARK_ASSIGN_OR_RETURN(Buffer b, Allocate(table.inv_freq.size()));
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.data(), table.inv_freq.data(),
                                               table.inv_freq.size() * sizeof(float),
                                               cudaMemcpyHostToDevice, stream_));
    SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    it = inv_freq_.emplace(key, std::move(b)).first;
  }
  return it->second.data();
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

void CudaBackend::SiluMul(const float* gate_up, int64_t rows, int inter, float* out) {
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(__nv_bfloat16 * copy, MakeBf16Copy(out, rows, size_t(rows) * inter));
    if (!launching()) return Status::Ok();
    return kernels::SiluMul<float>(gate_up, rows, inter, out, stream_, copy);
  }();
  Record(s);
}

namespace {

// fn(k, v) with the cache's pointers typed as its elements (float or __nv_bfloat16).
template <typename Fn>
Status WithCache(const KvCacheRef& cache, Fn&& fn) {
  if (cache.dtype == DType::kBF16) {
    return fn(static_cast<__nv_bfloat16*>(cache.k), static_cast<__nv_bfloat16*>(cache.v));
  }
  return fn(static_cast<float*>(cache.k), static_cast<float*>(cache.v));
}

}  // namespace

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

void CudaBackend::PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                                 const KvCacheRef& cache, const AttentionShape& shape, float* out) {
  Activate();
  Record(PagedAttentionImpl(q, sequences, cache, shape, out));
}

// Single-token sequences go to the split-K decode kernel, longer ones to the prefill kernel in
// tiles; both write disjoint rows of out. All metadata travels in one staged int32 array.
Status CudaBackend::PagedAttentionImpl(const float* q, std::span<const AttentionSequence> sequences,
                                       const KvCacheRef& cache, const AttentionShape& shape,
                                       float* out) {
  std::vector<int32_t> tables, row_ids, kv_len, table_offset;
  std::vector<kernels::PrefillTile> tiles;
  int max_kv_len = 0;
  for (const AttentionSequence& seq : sequences) {
    const int32_t offset = static_cast<int32_t>(tables.size());
    const int64_t blocks = (seq.context_len + shape.block_size - 1) / shape.block_size;
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.begin() + blocks);
    if (in_graph()) {
      // Same sizes every step of the graph: tables padded to graph_table_blocks_.
      if (seq.query_len != 1 || blocks > graph_table_blocks_) {
        return FailedPreconditionError(
            "cuda backend: graph step '" + graph_key_ + "' takes decode rows of at most " +
            std::to_string(graph_table_blocks_) + " KV blocks (got query_len " +
            std::to_string(seq.query_len) + ", " + std::to_string(blocks) + " blocks)");
      }
      tables.resize(offset + graph_table_blocks_, 0);
    }
    const int32_t first_len = static_cast<int32_t>(seq.context_len - seq.query_len + 1);
    if (seq.query_len == 1) {
      row_ids.push_back(static_cast<int32_t>(seq.query_start));
      kv_len.push_back(first_len);
      table_offset.push_back(offset);
      max_kv_len = std::max<int>(max_kv_len, first_len);
      continue;
    }
    for (int64_t i = 0; i < seq.query_len; i += kernels::kPrefillTileRows) {
      tiles.push_back(
          {static_cast<int32_t>(seq.query_start + i),
           static_cast<int32_t>(std::min<int64_t>(kernels::kPrefillTileRows, seq.query_len - i)),
           static_cast<int32_t>(first_len + i), offset});
    }
  }
  // One upload: [tables | row_ids | kv_len | table_offset | tiles].
  std::vector<int32_t> packed = tables;
  const size_t at_rows = packed.size();
  packed.insert(packed.end(), row_ids.begin(), row_ids.end());
  const size_t at_len = packed.size();
  packed.insert(packed.end(), kv_len.begin(), kv_len.end());
  const size_t at_offset = packed.size();
  packed.insert(packed.end(), table_offset.begin(), table_offset.end());
  const size_t at_tiles = packed.size();
  const auto* tile_words = reinterpret_cast<const int32_t*>(tiles.data());
  packed.insert(packed.end(), tile_words, tile_words + tiles.size() * 4);
  // Every layer of a step passes the same sequences: stage their metadata once.
  const int32_t* d = attention_device_;
  if (d == nullptr || packed != attention_packed_) {
    SPARK_ASSIGN_OR_RETURN(void* p, Stage(packed.data(), packed.size() * sizeof(int32_t)));
    d = static_cast<const int32_t*>(p);
    attention_packed_ = packed;
    attention_device_ = d;
  }
  kernels::PagedKvLayout layout{shape.num_heads, shape.num_kv_heads, shape.head_dim,
                                shape.block_size, shape.scale};
  layout.bf16_tensor_cores = options_.bf16_attention;
  if (!row_ids.empty()) {
    kernels::DecodeRows rows;
    rows.row_ids = d + at_rows;
    rows.kv_len = d + at_len;
    rows.table_offset = d + at_offset;
    rows.block_tables = d;
    rows.rows = static_cast<int64_t>(row_ids.size());
    rows.max_kv_len = in_graph() ? graph_table_blocks_ * shape.block_size : max_kv_len;
    const kernels::DecodeSplit plan =
        kernels::PlanDecodeSplit(rows, layout, sm_count_, cache.dtype == DType::kBF16);
    Buffer workspace;
    if (plan.workspace_floats > 0) {
      SPARK_ASSIGN_OR_RETURN(workspace, Scratch(plan.workspace_floats * sizeof(float)));
    }
    if (!launching()) return Status::Ok();
    SPARK_RETURN_IF_ERROR(WithCache(cache, [&](const auto* k, const auto* v) {
      return kernels::PagedDecodeAttention(q, rows, k, v, layout, plan, workspace.data(), out,
                                           stream_);
    }));
  }
  if (!tiles.empty()) {
    const auto* d_tiles = reinterpret_cast<const kernels::PrefillTile*>(d + at_tiles);
    SPARK_RETURN_IF_ERROR(WithCache(cache, [&](const auto* k, const auto* v) {
      return kernels::PagedPrefillAttention(q, d_tiles, static_cast<int>(tiles.size()), d, k, v,
                                            layout, out, stream_);
    }));
  }
  return Status::Ok();
}

void CudaBackend::Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
                      const MoeExperts& experts, float* out) {
  Activate();
  if (in_graph()) {
    Record(FailedPreconditionError("cuda backend: MoE layers do not run inside a graph step"));
    return;
  }
  Record(MoeImpl(x, rows, hidden, router_logits, experts, out));
}

// Route on the GPU, gather each local expert's rows contiguously, read the per-expert counts
// back (one small synchronisation), run two GEMMs per expert that got rows, combine.
Status CudaBackend::MoeImpl(const float* x, int64_t rows, int hidden, const float* router_logits,
                            const MoeExperts& experts, float* out) {
  const int k = experts.top_k, inter = experts.intermediate;
  const int local = static_cast<int>(experts.gate_up.size());
  if (local > static_cast<int>(kMaxLocalExperts)) {
    return InvalidArgumentError("cuda backend: more than 4096 local experts");
  }
  const int64_t entries = rows * k;
  kernels::RouterOptions ro;
  ro.num_experts = experts.num_experts;
  ro.top_k = k;
  ro.norm_topk_prob = experts.norm_topk_prob;
  // int32 scratch: ids, position, counts, offsets, cursor; float: weights.
  SPARK_ASSIGN_OR_RETURN(Buffer ints, Scratch((2 * entries + 3 * local + 1) * sizeof(int32_t)));
  SPARK_ASSIGN_OR_RETURN(Buffer weights, Allocate(entries));
  auto* ids = reinterpret_cast<int32_t*>(ints.data());
  int32_t* position = ids + entries;
  int32_t* counts = position + entries;
  int32_t* offsets = counts + local;
  int32_t* cursor = offsets + local + 1;
  SPARK_RETURN_IF_ERROR(kernels::RouteTopK(router_logits, rows, ro, ids, weights.data(), stream_));
  SPARK_ASSIGN_OR_RETURN(Buffer xs, Allocate(std::max<int64_t>(1, entries) * hidden));
  SPARK_RETURN_IF_ERROR(kernels::MoeDispatch<float>(x, rows, hidden, ids, k, experts.expert_begin,
                                                    local, counts, offsets, cursor, position,
                                                    xs.data(), stream_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counts_host_, counts, local * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  int64_t total = 0;
  for (int e = 0; e < local; ++e) total += counts_host_[e];
  SPARK_ASSIGN_OR_RETURN(Buffer gate_up, Allocate(std::max<int64_t>(1, total) * 2 * inter));
  SPARK_ASSIGN_OR_RETURN(Buffer act, Allocate(std::max<int64_t>(1, total) * inter));
  SPARK_ASSIGN_OR_RETURN(Buffer ys, Allocate(std::max<int64_t>(1, total) * hidden));
  // Each expert's rows through LinearImpl: fp32, bf16 or fp8 weights alike.
  int64_t offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(LinearImpl(xs.data() + offset * hidden, n, hidden, experts.gate_up[e],
                                       2 * inter, gate_up.data() + offset * 2 * inter));
    }
    offset += n;
  }
  SPARK_RETURN_IF_ERROR(kernels::SiluMul<float>(gate_up.data(), total, inter, act.data(), stream_));
  offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(LinearImpl(act.data() + offset * inter, n, inter, experts.down[e],
                                       hidden, ys.data() + offset * hidden));
    }
    offset += n;
  }
  return kernels::MoeCombine<float>(ys.data(), position, weights.data(), rows, k, hidden, out,
                                    stream_);
}

Result<void*> CudaBackend::ArenaAllocate(size_t bytes) {
  const size_t need = Align256(std::max<size_t>(bytes, 1));
  while (arena_chunk_ < arena_.size() && arena_used_ + need > arena_[arena_chunk_].second) {
    ++arena_chunk_;
    arena_used_ = 0;
  }
  if (arena_chunk_ == arena_.size()) {
    if (mode_ == Mode::kReplay) {
      return InternalError("cuda backend: graph step '" + graph_key_ +
                           "' asked for more workspace than when it was captured");
    }
    char* chunk = nullptr;
    const size_t chunk_bytes = std::max(need, kArenaChunk);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&chunk, chunk_bytes));
    arena_.push_back({chunk, chunk_bytes});
    arena_used_ = 0;
  }
  void* p = arena_[arena_chunk_].first + arena_used_;
  arena_used_ += need;
  return p;
}

Status CudaBackend::WaitStream(std::chrono::milliseconds timeout, cudaEvent_t event) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const cudaError_t e = event != nullptr ? cudaEventQuery(event) : cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) SPARK_CUDA_RETURN_IF_ERROR(e);
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceededError("cuda backend: device " + std::to_string(options_.device) +
                                   " still busy after " + std::to_string(timeout.count()) +
                                   " ms (a peer rank stopped in a collective?)");
    }
    std::this_thread::yield();
  }
}

void CudaBackend::EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                                    const float* pairs, int parts, int64_t tokens, float* out) {
  Activate();
  if (!launching()) return;
  Record(kernels::EmbeddingOfArgMax(table, row_begin, rows, hidden, pairs, parts, tokens, out,
                                    stream_));
}

}  // namespace spark::engine::backend::cuda
