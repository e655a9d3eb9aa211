// CudaBackend's attention ops: the q/k norm, RoPE and KV-cache write of Qwen3's layers (from
// separate q/k/v or from one stacked Linear output), and paged attention (split-K decode kernels
// for single-token sequences, the tiled prefill kernel for longer ones).
#include <algorithm>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/rope.h"

namespace spark::engine::backend::cuda {

using internal::WithCache;

void CudaBackend::QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                                    std::span<const int64_t> slots) {
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) {
    return Backend::QkNormRopeWriteKv(a, positions, slots);
  }
  Activate();
  Status s = [&]() -> Status {
    SPARK_ASSIGN_OR_RETURN(const float* inv_freq, InvFreq(a.head_dim, a.theta));
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_pos, Stage(positions));
    SPARK_ASSIGN_OR_RETURN(const int64_t* d_slots, Stage(slots));
    if (!launching()) return Status::Ok();
    kernels::QkvHeads heads{a.q,      a.k,        a.v,       a.q_norm,
                            a.k_norm, a.cache.k,  a.cache.v, a.cache.dtype == DType::kBF16,
                            a.heads,  a.kv_heads, a.head_dim};
    if (a.qkv != nullptr) {  // one stacked row per token: the column split folded in
      heads.src = a.qkv;
      heads.src_stride = a.qkv_stride;
      heads.v_out = a.v;
    }
    return kernels::QkNormRopeWriteKv(heads, d_pos, d_slots, static_cast<int64_t>(positions.size()),
                                      a.eps, inv_freq, stream_);
  }();
  Record(s);
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
      // Same sizes every step of the graph: tables padded to graph_.table_blocks().
      if (seq.query_len != 1 || blocks > graph_.table_blocks()) {
        return FailedPreconditionError(
            "cuda backend: graph step '" + graph_.key() + "' takes decode rows of at most " +
            std::to_string(graph_.table_blocks()) + " KV blocks (got query_len " +
            std::to_string(seq.query_len) + ", " + std::to_string(blocks) + " blocks)");
      }
      tables.resize(offset + graph_.table_blocks(), 0);
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
    rows.max_kv_len = in_graph() ? graph_.table_blocks() * shape.block_size : max_kv_len;
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

}  // namespace spark::engine::backend::cuda
