#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/logging.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/moe.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace spark::engine::backend::cuda {
namespace {

constexpr size_t kInitialStaging = 4 << 20;
constexpr size_t kMaxLocalExperts = 4096;

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
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->staging_host_, b->staging_bytes_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->staging_device_, b->staging_bytes_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->counts_host_, kMaxLocalExperts * sizeof(int32_t)));
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
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::Activate() { cudaSetDevice(options_.device); }

void CudaBackend::Record(const Status& s) {
  if (s.ok() || !status_.ok()) return;
  status_ = s;
  Logger("engine.cuda")->error("cuda backend: {}", s.message());
}

Status CudaBackend::Synchronize() {
  Activate();
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  staging_used_ = 0;
  return status_;
}

Result<void*> CudaBackend::Stage(const void* host, size_t bytes) {
  const size_t need = Align256(std::max<size_t>(bytes, 1));
  if (staging_used_ + need > staging_bytes_) {
    // Everything staged so far may still be read by queued work: wait, then start over.
    SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    staging_used_ = 0;
    if (need > staging_bytes_) {
      cudaFreeHost(staging_host_);
      cudaFree(staging_device_);
      staging_host_ = staging_device_ = nullptr;
      staging_bytes_ = std::max(need, 2 * staging_bytes_);
      SPARK_CUDA_RETURN_IF_ERROR(cudaMallocHost(&staging_host_, staging_bytes_));
      SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging_device_, staging_bytes_));
    }
  }
  char* h = staging_host_ + staging_used_;
  char* d = staging_device_ + staging_used_;
  staging_used_ += need;
  if (bytes > 0) {
    std::memcpy(h, host, bytes);
    SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
  }
  return d;
}

Result<Buffer> CudaBackend::Scratch(size_t bytes) {
  return Allocate((bytes + sizeof(float) - 1) / sizeof(float));
}

Result<Buffer> CudaBackend::Allocate(size_t count) {
  if (count == 0) return Buffer();
  Activate();
  SPARK_ASSIGN_OR_RETURN(void* p, allocator_.Allocate(count * sizeof(float)));
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, count * sizeof(float), stream_));
  DeviceAllocator* allocator = &allocator_;
  return Buffer(static_cast<float*>(p), count, [allocator](float* f) { allocator->Free(f); });
}

void CudaBackend::Upload(std::span<const float> host, float* dst) {
  Activate();
  Status s = [&]() -> Status {
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
    SPARK_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host.data(), src, host.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    staging_used_ = 0;
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
    return kernels::Embedding(table, row_begin, rows, hidden, d_ids,
                              static_cast<int64_t>(ids.size()), out, stream_);
  }();
  Record(s);
}

void CudaBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
                          float* out) {
  Activate();
  Record(kernels::RmsNorm<float>(x, nullptr, weight, rows, dim, eps, out, stream_));
}

void CudaBackend::Linear(const float* x, int64_t rows, int in_features, const float* w,
                         int out_features, float* out) {
  Activate();
  Record(gemm_->Run(kernels::GemmType::kF32, kernels::GemmType::kF32, x, rows, in_features, w,
                    out_features, out, stream_));
}

Result<const float*> CudaBackend::InvFreq(int head_dim, double theta) {
  const auto key = std::make_pair(head_dim, theta);
  auto it = inv_freq_.find(key);
  if (it == inv_freq_.end()) {
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
    return kernels::Rope<float>(x, d_pos, static_cast<int64_t>(positions.size()), heads, head_dim,
                                inv_freq, 1.0f, stream_);
  }();
  Record(s);
}

void CudaBackend::Add(float* x, const float* y, size_t count) {
  Activate();
  Record(kernels::Add<float>(x, y, count, stream_));
}

void CudaBackend::SiluMul(const float* gate_up, int64_t rows, int inter, float* out) {
  Activate();
  Record(kernels::SiluMul<float>(gate_up, rows, inter, out, stream_));
}

void CudaBackend::WriteKv(const float* k, const float* v, std::span<const int64_t> slots,
                          int kv_width, float* k_cache, float* v_cache) {
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, Stage(slots));
    return kernels::WriteKv<float>(k, v, d_slots, static_cast<int64_t>(slots.size()), kv_width,
                                   k_cache, v_cache, stream_);
  }();
  Record(s);
}

void CudaBackend::PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                                 const float* k_cache, const float* v_cache,
                                 const AttentionShape& shape, float* out) {
  Activate();
  Record(PagedAttentionImpl(q, sequences, k_cache, v_cache, shape, out));
}

// Single-token sequences go to the split-K decode kernel, longer ones to the prefill kernel in
// tiles; both write disjoint rows of out. All metadata travels in one staged int32 array.
Status CudaBackend::PagedAttentionImpl(const float* q, std::span<const AttentionSequence> sequences,
                                       const float* k_cache, const float* v_cache,
                                       const AttentionShape& shape, float* out) {
  std::vector<int32_t> tables, row_ids, kv_len, table_offset;
  std::vector<kernels::PrefillTile> tiles;
  int max_kv_len = 0;
  for (const AttentionSequence& seq : sequences) {
    const int32_t offset = static_cast<int32_t>(tables.size());
    const int64_t blocks = (seq.context_len + shape.block_size - 1) / shape.block_size;
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.begin() + blocks);
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
  SPARK_ASSIGN_OR_RETURN(const int32_t* d, Stage(std::span<const int32_t>(packed)));
  const kernels::PagedKvLayout layout{shape.num_heads, shape.num_kv_heads, shape.head_dim,
                                      shape.block_size, shape.scale};
  if (!row_ids.empty()) {
    kernels::DecodeRows rows;
    rows.row_ids = d + at_rows;
    rows.kv_len = d + at_len;
    rows.table_offset = d + at_offset;
    rows.block_tables = d;
    rows.rows = static_cast<int64_t>(row_ids.size());
    rows.max_kv_len = max_kv_len;
    const kernels::DecodeSplit plan = kernels::PlanDecodeSplit(rows, layout, sm_count_);
    Buffer workspace;
    if (plan.workspace_floats > 0) {
      SPARK_ASSIGN_OR_RETURN(workspace, Allocate(plan.workspace_floats));
    }
    SPARK_RETURN_IF_ERROR(kernels::PagedDecodeAttention<float>(
        q, rows, k_cache, v_cache, layout, plan, workspace.data(), out, stream_));
  }
  if (!tiles.empty()) {
    SPARK_RETURN_IF_ERROR(kernels::PagedPrefillAttention<float>(
        q, reinterpret_cast<const kernels::PrefillTile*>(d + at_tiles),
        static_cast<int>(tiles.size()), d, k_cache, v_cache, layout, out, stream_));
  }
  return Status::Ok();
}

void CudaBackend::Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
                      const MoeExperts& experts, float* out) {
  Activate();
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
  using kernels::GemmType;
  int64_t offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(gemm_->Run(GemmType::kF32, GemmType::kF32, xs.data() + offset * hidden,
                                       n, hidden, experts.gate_up[e], 2 * inter,
                                       gate_up.data() + offset * 2 * inter, stream_));
    }
    offset += n;
  }
  SPARK_RETURN_IF_ERROR(kernels::SiluMul<float>(gate_up.data(), total, inter, act.data(), stream_));
  offset = 0;
  for (int e = 0; e < local; ++e) {
    const int64_t n = counts_host_[e];
    if (n > 0) {
      SPARK_RETURN_IF_ERROR(gemm_->Run(GemmType::kF32, GemmType::kF32, act.data() + offset * inter,
                                       n, inter, experts.down[e], hidden,
                                       ys.data() + offset * hidden, stream_));
    }
    offset += n;
  }
  return kernels::MoeCombine<float>(ys.data(), position, weights.data(), rows, k, hidden, out,
                                    stream_);
}

}  // namespace spark::engine::backend::cuda
