// CudaDeepseekOps: routing, the routed and shared experts, and the grouped output projection.
//
// Experts held in bf16 or a quantised type run grouped (kernels/moe_grouped.h): the token lists
// and work items are built on the device and each expert's weights are read once per step by
// kernels::QuantGemm (SwiGLU fused into the gate/up product, the routing weight into the down
// product), so nothing waits for the host and an MoE layer may be captured in a CUDA graph.
// Experts held in fp32 (the reference numerics) take each expert's rows through the fp32 GEMM
// after one download of the choices; that path cannot run inside a graph step.
#include <algorithm>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_backend_internal.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/moe_grouped.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda {
namespace {

bool Grouped(DType t) { return t == DType::kBF16 || IsQuantised(t); }

// InvalidArgument unless every routed expert shares one element type.
Result<DType> ExpertType(std::span<const SwiGluWeights> experts) {
  const DType t = experts.front().gate_up.dtype;
  for (const SwiGluWeights& e : experts) {
    if (e.gate_up.dtype != t || e.down.dtype != t) {
      return InvalidArgumentError("cuda backend: routed experts of one layer must share a weight "
                                  "type");
    }
  }
  return t;
}

}  // namespace

void CudaDeepseekOps::Route(const RouteArgs& a) {
  b_.Activate();
  Status s = [&]() -> Status {
    const int32_t* token_ids = nullptr;
    if (a.hash_table != nullptr) {
      SPARK_ASSIGN_OR_RETURN(token_ids, b_.Stage(a.token_ids));
    }
    if (!b_.launching()) return Status::Ok();
    return kernels::DeepseekRoute({.logits = a.logits,
                                   .rows = a.tokens,
                                   .experts = a.experts,
                                   .top_k = a.top_k,
                                   .bias = a.bias,
                                   .hash_table = a.hash_table,
                                   .token_ids = token_ids,
                                   .scaling = a.scaling,
                                   .temperature = a.temperature,
                                   .ids = a.ids,
                                   .weights = a.weights},
                                  b_.stream_);
  }();
  b_.Record(s);
}

void CudaDeepseekOps::MoeExperts(const MoeExpertsArgs& a) {
  b_.Activate();
  Status s = [&]() -> Status {
    float* shared = nullptr;
    Buffer shared_out;
    if (a.shared.gate_up.data != nullptr) {
      SPARK_ASSIGN_OR_RETURN(shared_out, b_.Scratch(static_cast<size_t>(a.tokens) * a.hidden * 4));
      shared = shared_out.data();
      SPARK_RETURN_IF_ERROR(SharedExpert(a, shared));
    }
    if (a.experts.empty()) {
      if (!b_.launching()) return Status::Ok();
      return kernels::MoeCombineAssignments(nullptr, a.ids, a.tokens, a.top_k, a.expert_begin, 0,
                                            a.hidden, shared, a.out, b_.stream_);
    }
    SPARK_ASSIGN_OR_RETURN(const DType t, ExpertType(a.experts));
    const size_t assignments = static_cast<size_t>(a.tokens) * a.top_k;
    SPARK_ASSIGN_OR_RETURN(Buffer ys, b_.Scratch(std::max<size_t>(1, assignments) * a.hidden * 4));
    if (Grouped(t)) {
      SPARK_RETURN_IF_ERROR(GroupedExperts(a, ys.data()));
    } else {
      SPARK_RETURN_IF_ERROR(Fp32Experts(a, ys.data()));
    }
    if (!b_.launching()) return Status::Ok();
    return kernels::MoeCombineAssignments(ys.data(), a.ids, a.tokens, a.top_k, a.expert_begin,
                                          static_cast<int>(a.experts.size()), a.hidden, shared,
                                          a.out, b_.stream_);
  }();
  b_.Record(s);
}

Result<const kernels::QuantMatrix*> CudaDeepseekOps::ExpertTable(
    std::span<const SwiGluWeights> experts, bool down, int n, int k) {
  std::vector<const void*> matrices;
  for (const SwiGluWeights& e : experts) matrices.push_back(down ? e.down.data : e.gate_up.data);
  // Keyed by the list's address and checked against its matrices: a later model may reuse the
  // address for other weights.
  CachedTable& cached = expert_tables_[{experts.data(), down}];
  if (cached.matrices == matrices) return static_cast<const kernels::QuantMatrix*>(cached.table.raw());
  if (b_.in_graph()) {
    return FailedPreconditionError(
        "cuda backend: an MoE layer's expert table is built inside a graph step; run one eager "
        "step first");
  }
  std::vector<kernels::QuantMatrix> table;
  for (const SwiGluWeights& e : experts) {
    table.push_back(internal::QuantView(down ? e.down : e.gate_up, n, k));
  }
  const size_t bytes = table.size() * sizeof(kernels::QuantMatrix);
  SPARK_ASSIGN_OR_RETURN(Buffer b, b_.AllocateWeights((bytes + 3) / 4, DType::kF32));
  SPARK_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(b.raw(), table.data(), bytes, cudaMemcpyHostToDevice, b_.stream_));
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(b_.stream_));
  cached = {std::move(matrices), std::move(b)};
  return static_cast<const kernels::QuantMatrix*>(cached.table.raw());
}

Status CudaDeepseekOps::GroupedExperts(const MoeExpertsArgs& a, float* ys) {
  const int local = static_cast<int>(a.experts.size()), hidden = a.hidden, inter = a.inter;
  const int64_t assignments = a.tokens * a.top_k;
  SPARK_ASSIGN_OR_RETURN(const kernels::QuantMatrix* gate_up,
                         ExpertTable(a.experts, false, 2 * inter, hidden));
  SPARK_ASSIGN_OR_RETURN(const kernels::QuantMatrix* down,
                         ExpertTable(a.experts, true, hidden, inter));
  Buffer xb_scratch;
  SPARK_ASSIGN_OR_RETURN(const auto xb, b_.Bf16Rows(a.x, a.tokens, hidden, &xb_scratch));
  const int tile = kernels::QuantGemmTileTokens(a.tokens);
  const int max_work = kernels::MoeMaxWork(assignments, local, tile);
  SPARK_ASSIGN_OR_RETURN(
      Buffer ints, b_.Scratch((2 * assignments + 3 * static_cast<size_t>(max_work) + 1) * 4));
  auto* list_token = reinterpret_cast<int32_t*>(ints.raw());
  int32_t* list_assign = list_token + assignments;
  auto* work = reinterpret_cast<kernels::QuantWork*>(list_assign + assignments);
  auto* work_count = reinterpret_cast<int32_t*>(work + max_work);
  // The activation between the products: bf16, or with precise_quant fp32 split in two parts.
  const bool split = xb.lo != nullptr;
  const size_t act_count = std::max<size_t>(1, assignments) * inter;
  SPARK_ASSIGN_OR_RETURN(Buffer act, b_.Scratch(act_count * (split ? 8 : 2), DType::kBF16));
  if (!b_.launching()) return Status::Ok();
  SPARK_RETURN_IF_ERROR(kernels::MoeBuildLists({.ids = a.ids,
                                                .assignments = assignments,
                                                .top_k = a.top_k,
                                                .expert_begin = a.expert_begin,
                                                .local = local,
                                                .tile = tile,
                                                .list_token = list_token,
                                                .list_assign = list_assign,
                                                .work = work,
                                                .work_count = work_count},
                                               b_.stream_));
  kernels::QuantGemmArgs g;
  g.single = internal::QuantView(a.experts.front().gate_up, 2 * inter, hidden);
  g.matrices = gate_up;
  g.work = work;
  g.work_count = work_count;
  g.max_work = max_work;
  g.tokens = a.tokens;
  g.x = xb.hi;
  g.x_lo = xb.lo;
  g.ldx = hidden;
  g.x_rows = list_token;
  g.ldo = inter;
  g.epilogue = kernels::QuantGemmArgs::Epilogue::kSwiGlu;
  g.limit = a.swiglu_limit;
  auto* act_hi = static_cast<__nv_bfloat16*>(act.raw());
  __nv_bfloat16* act_lo = split ? act_hi + act_count : nullptr;
  float* act_f32 = split ? reinterpret_cast<float*>(act_hi + 2 * act_count) : nullptr;
  if (split) {
    g.out = act_f32;
  } else {
    g.out_bf16 = act_hi;
  }
  SPARK_RETURN_IF_ERROR(kernels::QuantGemm(g, b_.stream_));
  if (split) SPARK_RETURN_IF_ERROR(kernels::SplitBf16(act_f32, act_count, act_hi, act_lo, b_.stream_));
  kernels::QuantGemmArgs d = g;
  d.single = internal::QuantView(a.experts.front().down, hidden, inter);
  d.matrices = down;
  d.x = act_hi;
  d.x_lo = act_lo;
  d.ldx = inter;
  d.x_rows = nullptr;
  d.out_rows = list_assign;
  d.ldo = hidden;
  d.epilogue = kernels::QuantGemmArgs::Epilogue::kScale;
  d.row_scale = a.weights;
  d.out_bf16 = nullptr;
  d.out = ys;
  return kernels::QuantGemm(d, b_.stream_);
}

// The reference numerics: one download of the choices, then per expert its rows gathered,
// through the fp32 GEMMs and the clamped SwiGLU, scattered back times their routing weights.
Status CudaDeepseekOps::Fp32Experts(const MoeExpertsArgs& a, float* ys) {
  if (b_.in_graph()) {
    return FailedPreconditionError("cuda backend: fp32 experts do not run inside a graph step");
  }
  const int local = static_cast<int>(a.experts.size()), hidden = a.hidden, inter = a.inter;
  const int64_t assignments = a.tokens * a.top_k;
  std::vector<float> ids(assignments);
  SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids.data(), a.ids, assignments * sizeof(float),
                                             cudaMemcpyDeviceToHost, b_.stream_));
  SPARK_RETURN_IF_ERROR(b_.WaitStream());
  std::vector<std::vector<int32_t>> tokens(local), slots(local);
  for (int64_t i = 0; i < assignments; ++i) {
    const int e = static_cast<int>(ids[i]) - a.expert_begin;
    if (e < 0 || e >= local) continue;
    tokens[e].push_back(static_cast<int32_t>(i / a.top_k));
    slots[e].push_back(static_cast<int32_t>(i));
  }
  for (int e = 0; e < local; ++e) {
    const int64_t n = static_cast<int64_t>(tokens[e].size());
    if (n == 0) continue;
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_tokens, b_.Stage(std::span<const int32_t>(tokens[e])));
    SPARK_ASSIGN_OR_RETURN(const int32_t* d_slots, b_.Stage(std::span<const int32_t>(slots[e])));
    SPARK_ASSIGN_OR_RETURN(Buffer xs, b_.Scratch(static_cast<size_t>(n) * hidden * 4));
    SPARK_ASSIGN_OR_RETURN(Buffer y, b_.Scratch(static_cast<size_t>(n) * hidden * 4));
    SPARK_RETURN_IF_ERROR(kernels::GatherRows(a.x, d_tokens, n, hidden, xs.data(), b_.stream_));
    SPARK_RETURN_IF_ERROR(
        SwiGlu(xs.data(), n, hidden, a.experts[e], inter, a.swiglu_limit, y.data()));
    SPARK_RETURN_IF_ERROR(
        kernels::ScatterScaledRows(y.data(), d_slots, a.weights, n, hidden, ys, b_.stream_));
  }
  return Status::Ok();
}

Status CudaDeepseekOps::SharedExpert(const MoeExpertsArgs& a, float* out) {
  const DType t = a.shared.gate_up.dtype;
  if (!Grouped(t) || a.tokens > kernels::kQuantGemmMaxRows) {
    return SwiGlu(a.x, a.tokens, a.hidden, a.shared, a.shared_inter, a.swiglu_limit, out);
  }
  // Decode batches: both products decode the weights in registers, SwiGLU fused.
  Buffer xb_scratch;
  SPARK_ASSIGN_OR_RETURN(const auto xb, b_.Bf16Rows(a.x, a.tokens, a.hidden, &xb_scratch));
  const bool split = xb.lo != nullptr;
  const size_t act_count = static_cast<size_t>(a.tokens) * a.shared_inter;
  SPARK_ASSIGN_OR_RETURN(Buffer act, b_.Scratch(act_count * (split ? 8 : 2), DType::kBF16));
  auto* act_hi = static_cast<__nv_bfloat16*>(act.raw());
  __nv_bfloat16* act_lo = split ? act_hi + act_count : nullptr;
  float* act_f32 = split ? reinterpret_cast<float*>(act_hi + 2 * act_count) : nullptr;
  kernels::QuantGemmArgs g;
  g.single = internal::QuantView(a.shared.gate_up, 2 * a.shared_inter, a.hidden);
  g.tokens = a.tokens;
  g.x = xb.hi;
  g.x_lo = xb.lo;
  g.ldx = a.hidden;
  g.ldo = a.shared_inter;
  g.epilogue = kernels::QuantGemmArgs::Epilogue::kSwiGlu;
  g.limit = a.swiglu_limit;
  if (split) {
    g.out = act_f32;
  } else {
    g.out_bf16 = act_hi;
  }
  kernels::QuantGemmArgs d;
  d.single = internal::QuantView(a.shared.down, a.hidden, a.shared_inter);
  d.tokens = a.tokens;
  d.x = act_hi;
  d.x_lo = act_lo;
  d.ldx = a.shared_inter;
  d.ldo = a.hidden;
  d.out = out;
  // One matrix alone leaves SMs idle at decode batches: split k where that pays (one scratch
  // for both products' partial sums).
  g.k_splits = kernels::QuantGemmKSplits(g.single, a.tokens);
  d.k_splits = kernels::QuantGemmKSplits(d.single, a.tokens);
  const size_t parts = std::max(size_t(g.k_splits) * g.single.n, size_t(d.k_splits) * d.ldo);
  Buffer split_scratch;
  if (g.k_splits > 1 || d.k_splits > 1) {
    SPARK_ASSIGN_OR_RETURN(split_scratch, b_.Scratch(parts * a.tokens * 4));
    g.split_out = d.split_out = split_scratch.data();
  }
  if (!b_.launching()) return Status::Ok();
  SPARK_RETURN_IF_ERROR(kernels::QuantGemm(g, b_.stream_));
  if (split) SPARK_RETURN_IF_ERROR(kernels::SplitBf16(act_f32, act_count, act_hi, act_lo, b_.stream_));
  return kernels::QuantGemm(d, b_.stream_);
}

// out [rows, hidden] = down(SwiGLU(x gate_up^T)) through the backend's Linear (any weight type,
// any rows).
Status CudaDeepseekOps::SwiGlu(const float* x, int64_t rows, int hidden, const SwiGluWeights& w,
                               int inter, float limit, float* out) {
  SPARK_ASSIGN_OR_RETURN(Buffer gate_up, b_.Scratch(static_cast<size_t>(rows) * 2 * inter * 4));
  SPARK_ASSIGN_OR_RETURN(Buffer act, b_.Scratch(static_cast<size_t>(rows) * inter * 4));
  SPARK_RETURN_IF_ERROR(b_.LinearImpl(x, rows, hidden, w.gate_up, 2 * inter, gate_up.data()));
  if (b_.launching()) {
    SPARK_RETURN_IF_ERROR(
        kernels::SwiGluClamp(gate_up.data(), rows, inter, limit, act.data(), b_.stream_));
  }
  return b_.LinearImpl(act.data(), rows, inter, w.down, hidden, out);
}

void CudaDeepseekOps::GroupedLinear(const float* x, int64_t rows, std::span<const int> group_in,
                                    WeightRef w, int out_per_group, float* y) {
  b_.Activate();
  b_.Record(GroupedLinearImpl(x, rows, group_in, w, out_per_group, y));
}

Status CudaDeepseekOps::GroupedLinearImpl(const float* x, int64_t rows,
                                          std::span<const int> group_in, WeightRef w,
                                          int out_per_group, float* y) {
  const int groups = static_cast<int>(group_in.size());
  const bool equal = std::all_of(group_in.begin(), group_in.end(),
                                 [&](int in) { return in == group_in.front(); });
  if (IsQuantised(w.dtype) && !equal) {
    return InvalidArgumentError("cuda backend: a quantised grouped projection needs equal groups");
  }
  const int in_g = group_in.empty() ? 0 : group_in.front();
  if (Grouped(w.dtype) && equal && out_per_group % 16 == 0 &&
      rows <= kernels::kQuantGemmMaxRows) {
    Buffer xb_scratch;
    SPARK_ASSIGN_OR_RETURN(const auto xb, b_.Bf16Rows(x, rows, groups * in_g, &xb_scratch));
    if (!b_.launching()) return Status::Ok();
    kernels::QuantGemmArgs g;
    g.single = internal::QuantView(w, groups * out_per_group, in_g);
    g.tokens = rows;
    g.x = xb.hi;
    g.x_lo = xb.lo;
    g.ldx = int64_t{groups} * in_g;
    g.group_rows = out_per_group;
    g.ldo = int64_t{groups} * out_per_group;
    g.out = y;
    return kernels::QuantGemm(g, b_.stream_);
  }
  Buffer widened;
  if (IsQuantised(w.dtype)) {  // many rows: one pass widens all groups for the GEMMs
    SPARK_ASSIGN_OR_RETURN(w, b_.WidenQuant(w, groups * out_per_group, in_g, &widened));
  }
  // Each group's columns gathered, its GEMM, its outputs placed (2-D copies on the stream).
  int total = 0;
  for (int in : group_in) total += in;
  const auto* block = static_cast<const char*>(w.data);
  int column = 0;
  for (int g = 0; g < groups; ++g) {
    const int in = group_in[g];
    SPARK_ASSIGN_OR_RETURN(Buffer xg, b_.Scratch(static_cast<size_t>(rows) * in * 4));
    SPARK_ASSIGN_OR_RETURN(Buffer yg, b_.Scratch(static_cast<size_t>(rows) * out_per_group * 4));
    if (b_.launching()) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(xg.data(), in * 4, x + column, total * 4,
                                                   in * 4, rows, cudaMemcpyDeviceToDevice,
                                                   b_.stream_));
    }
    SPARK_RETURN_IF_ERROR(b_.LinearImpl(xg.data(), rows, in, WeightRef(block, w.dtype),
                                        out_per_group, yg.data()));
    if (b_.launching()) {
      SPARK_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
          y + g * out_per_group, size_t(groups) * out_per_group * 4, yg.data(),
          out_per_group * 4, out_per_group * 4, rows, cudaMemcpyDeviceToDevice, b_.stream_));
    }
    block += static_cast<size_t>(out_per_group) * in * DTypeBytes(w.dtype);
    column += in;
  }
  return Status::Ok();
}

}  // namespace spark::engine::backend::cuda
