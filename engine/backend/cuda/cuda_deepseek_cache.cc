// CudaDeepseekOps: RoPE, per-token cache fields and the compressors' softmax pooling
// (kernels/deepseek_cache.h).
#include <algorithm>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_internal.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "kernels/deepseek_cache.h"

namespace spark::engine::backend::cuda {

using internal::Rows;

void CudaDeepseekOps::Rope(float* x, std::span<const int32_t> positions, int heads, int dim,
                           const RopeTable& table, bool inverse) {
  b_.Activate();
  if (positions.empty()) return;
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_positions, b_.Stage(positions));
    if (!b_.launching()) return Status::Ok();
    return kernels::RopeTrailing(x, d_positions, static_cast<int64_t>(positions.size()), heads, dim,
                                 internal::Rope(table, inverse), b_.stream_);
  }();
  b_.Record(s);
}

void CudaDeepseekOps::WriteField(const float* rows, std::span<const int64_t> slots,
                                 const CacheField& field) {
  b_.Activate();
  if (slots.empty()) return;
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, b_.Stage(slots));
    if (!b_.launching()) return Status::Ok();
    return kernels::WriteCacheRows(rows, d_slots, static_cast<int64_t>(slots.size()), Rows(field),
                                   b_.stream_);
  }();
  b_.Record(s);
}

void CudaDeepseekOps::WriteCompressorInputs(const CompressorInputs& in,
                                            std::span<const int32_t> positions,
                                            std::span<const int64_t> slots) {
  b_.Activate();
  if (slots.empty()) return;
  Status s = [&]() -> Status {
    if (in.ape != nullptr && positions.size() != slots.size()) {
      return InvalidArgumentError("cuda backend: WriteCompressorInputs got " +
                                  std::to_string(positions.size()) + " positions for " +
                                  std::to_string(slots.size()) + " slots");
    }
    SPARK_RETURN_IF_ERROR(b_.ReserveStaging(internal::StagedBytes(slots, positions)));
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, b_.Stage(slots));
    const int32_t* d_positions = nullptr;
    if (in.ape != nullptr) {
      SPARK_ASSIGN_OR_RETURN(d_positions, b_.Stage(positions));
    }
    if (!b_.launching()) return Status::Ok();
    const kernels::CompressorRows rows{
        in.kv, in.gate, in.ape, in.width, in.ratio, Rows(in.kv_field), Rows(in.gate_field)};
    return kernels::WriteCompressorRows(rows, d_positions, d_slots,
                                        static_cast<int64_t>(slots.size()), b_.stream_);
  }();
  b_.Record(s);
}

void CudaDeepseekOps::Compress(const CompressArgs& a) {
  b_.Activate();
  b_.Record(CompressImpl(a));
}

Status CudaDeepseekOps::CompressImpl(const CompressArgs& a) {
  const int64_t entries = static_cast<int64_t>(a.entry_slots.size());
  if (entries == 0) return Status::Ok();
  if (b_.in_graph()) return internal::RefuseInGraph("Compress");
  if (a.pool <= 0 || a.source_slots.size() != static_cast<size_t>(entries * a.pool) ||
      (a.rope != nullptr && a.entry_positions.size() != static_cast<size_t>(entries))) {
    return InvalidArgumentError(
        "cuda backend: Compress got " + std::to_string(a.source_slots.size()) +
        " source slots and " + std::to_string(a.entry_positions.size()) + " positions for " +
        std::to_string(entries) + " entries of pool " + std::to_string(a.pool));
  }
  kernels::PoolArgs p;
  p.kv = Rows(a.kv);
  p.gate = Rows(a.gate);
  p.dim = a.dim;
  p.pool = a.pool;
  p.overlap = a.overlap;
  p.entries = entries;
  p.norm = a.norm;
  p.eps = a.eps;
  p.out = Rows(a.out);
  p.out_rows = a.out_rows;
  SPARK_RETURN_IF_ERROR(b_.ReserveStaging(
      internal::StagedBytes(a.source_slots, a.entry_slots, a.entry_positions)));
  SPARK_ASSIGN_OR_RETURN(p.source_slots, b_.Stage(a.source_slots));
  if (a.out_rows == nullptr) {
    SPARK_ASSIGN_OR_RETURN(p.entry_slots, b_.Stage(a.entry_slots));
  }
  if (a.rope != nullptr) {
    p.rope = internal::Rope(*a.rope, /*inverse=*/false);
    SPARK_ASSIGN_OR_RETURN(p.entry_positions, b_.Stage(a.entry_positions));
  }
  if (!b_.launching()) return Status::Ok();
  return kernels::PoolEntries(p, b_.stream_);
}

}  // namespace spark::engine::backend::cuda
