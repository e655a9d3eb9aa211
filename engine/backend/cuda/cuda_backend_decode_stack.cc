// CudaBackend::DecodeLayers: batch-1 decode of dense bf16 layers over a bf16 cache as one
// persistent kernel (kernels/decode_stack.h). Everything the kernel reads per step (context
// length, slot, block table, the layers' pointers) is staged, so a graph replays it with the
// step's values; the plan depends only on the shapes and the graph's table size.
#include <algorithm>
#include <vector>

#include "base/logging.h"
#include "engine/backend/cuda/cuda_backend.h"

namespace spark::engine::backend::cuda {
namespace {

bool AllBf16(const DenseLayerRefs& l) {
  for (const WeightRef& w : {l.q, l.k, l.v, l.o, l.gate_up, l.down}) {
    if (w.dtype != DType::kBF16 || w.data == nullptr) return false;
  }
  return l.cache.dtype == DType::kBF16;
}

kernels::DecodeStackShape ShapeOf(const DenseStack& stack) {
  kernels::DecodeStackShape s;
  s.layers = static_cast<int>(stack.layers.size());
  s.hidden = stack.hidden;
  s.heads = stack.attention.num_heads;
  s.kv_heads = stack.attention.num_kv_heads;
  s.head_dim = stack.attention.head_dim;
  s.inter = stack.inter;
  s.block_size = stack.attention.block_size;
  s.eps = stack.eps;
  s.scale = stack.attention.scale;
  return s;
}

}  // namespace

bool CudaBackend::DecodeLayers(const DenseStack& stack, float* h, const AttentionSequence& seq,
                               int64_t slot) {
  if (!options_.fused_decode || seq.query_len != 1 || seq.context_len < 1 || stack.layers.empty()) {
    return false;
  }
  for (const DenseLayerRefs& l : stack.layers) {
    if (!AllBf16(l)) return false;
  }
  const int block_size = stack.attention.block_size;
  const int64_t blocks = (seq.context_len + block_size - 1) / block_size;
  if (static_cast<int64_t>(seq.block_table.size()) < blocks) return false;
  if (in_graph() && blocks > graph_table_blocks_) return false;  // PagedAttention says why
  const int table_blocks = in_graph() ? graph_table_blocks_ : static_cast<int>(blocks);
  const kernels::DecodeStackShape shape = ShapeOf(stack);
  const std::vector<int64_t> key{
      shape.layers,   shape.hidden, shape.heads, shape.kv_heads,
      shape.head_dim, shape.inter,  block_size,  int64_t{table_blocks} * block_size};
  Activate();
  auto it = decode_stack_plans_.find(key);
  if (it == decode_stack_plans_.end()) {
    it =
        decode_stack_plans_.emplace(key, kernels::PlanDecodeStack(shape, table_blocks * block_size))
            .first;
    if (!it->second.ok()) {
      Logger("engine.cuda")
          ->debug("cuda backend: decode layers op by op: {}", it->second.status().message());
    }
  }
  if (!it->second.ok()) return false;
  ++decode_layers_taken_;
  Record(DecodeStackImpl(stack, shape, *it->second, h, seq, slot, table_blocks));
  return true;
}

Status CudaBackend::DecodeStackImpl(const DenseStack& stack,
                                    const kernels::DecodeStackShape& shape,
                                    const kernels::DecodeStackPlan& plan, float* h,
                                    const AttentionSequence& seq, int64_t slot, int table_blocks) {
  SPARK_ASSIGN_OR_RETURN(const float* inv_freq, InvFreq(stack.attention.head_dim, stack.theta));
  std::vector<kernels::DecodeStackLayer> layers;
  layers.reserve(stack.layers.size());
  for (const DenseLayerRefs& l : stack.layers) {
    using Bf16 = const __nv_bfloat16*;
    layers.push_back({l.input_norm, static_cast<Bf16>(l.q.data), static_cast<Bf16>(l.k.data),
                      static_cast<Bf16>(l.v.data), l.q_norm, l.k_norm, static_cast<Bf16>(l.o.data),
                      l.post_attention_norm, static_cast<Bf16>(l.gate_up.data),
                      static_cast<Bf16>(l.down.data), static_cast<__nv_bfloat16*>(l.cache.k),
                      static_cast<__nv_bfloat16*>(l.cache.v)});
  }
  // A graph's table size may exceed the sequence's table: padded, as PagedAttention pads it.
  const size_t held = std::min(seq.block_table.size(), static_cast<size_t>(table_blocks));
  std::vector<int32_t> table(seq.block_table.begin(), seq.block_table.begin() + held);
  table.resize(table_blocks, 0);
  const int32_t meta[1] = {static_cast<int32_t>(seq.context_len)};
  const int64_t slots[1] = {slot};
  kernels::DecodeStackStep step;
  SPARK_ASSIGN_OR_RETURN(void* d_layers,
                         Stage(layers.data(), layers.size() * sizeof(kernels::DecodeStackLayer)));
  SPARK_ASSIGN_OR_RETURN(void* d_meta, Stage(meta, sizeof(meta)));
  SPARK_ASSIGN_OR_RETURN(void* d_slot, Stage(slots, sizeof(slots)));
  SPARK_ASSIGN_OR_RETURN(void* d_table, Stage(table.data(), table.size() * sizeof(int32_t)));
  step.layers = static_cast<const kernels::DecodeStackLayer*>(d_layers);
  step.inv_freq = inv_freq;
  step.meta = static_cast<const int32_t*>(d_meta);
  step.slot = static_cast<const int64_t*>(d_slot);
  step.block_table = static_cast<const int32_t*>(d_table);
  SPARK_ASSIGN_OR_RETURN(Buffer workspace, Scratch(plan.workspace_bytes));
  if (!launching()) return Status::Ok();
  return kernels::DecodeStack(shape, step, plan, h, workspace.raw(), stream_);
}

}  // namespace spark::engine::backend::cuda
