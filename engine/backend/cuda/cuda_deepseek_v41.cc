// CudaDeepseekOps: DeepSeek-V4.1's fake quantisers (kernels/deepseek_quant.h), the candidate
// blocks of the two-level top-k (kernels/deepseek_indexer.h) and Engram's gated write
// (kernels/deepseek_hc.h).
#include <algorithm>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_internal.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "kernels/deepseek_hc.h"
#include "kernels/deepseek_indexer.h"
#include "kernels/deepseek_quant.h"

namespace spark::engine::backend::cuda {
namespace {

kernels::FakeQuantKind Format(FakeQuantFormat f) {
  switch (f) {
    case FakeQuantFormat::kFp8Ue8m0:
      return kernels::FakeQuantKind::kFp8Ue8m0;
    case FakeQuantFormat::kFp4Ue8m0:
      return kernels::FakeQuantKind::kFp4Ue8m0;
    case FakeQuantFormat::kFp4E4m3:
      return kernels::FakeQuantKind::kFp4E4m3;
  }
  return kernels::FakeQuantKind::kFp8Ue8m0;
}

}  // namespace

void CudaDeepseekOps::FakeQuant(const FakeQuantArgs& a) {
  b_.Activate();
  if (!b_.launching()) return;
  b_.Record(kernels::FakeQuantize(a.x, a.rows, a.width, a.block, Format(a.format), b_.stream_));
}

void CudaDeepseekOps::CandidateBlocks(const CandidateBlockArgs& a) {
  b_.Activate();
  b_.Record(CandidateBlocksImpl(a));
}

Status CudaDeepseekOps::CandidateBlocksImpl(const CandidateBlockArgs& a) {
  const int64_t rows = static_cast<int64_t>(a.count.size());
  if (rows == 0 || a.stride <= 0) return Status::Ok();
  if (b_.in_graph()) return internal::RefuseInGraph("CandidateBlocks");
  if (*std::max_element(a.count.begin(), a.count.end()) > a.stride) {
    return InvalidArgumentError("cuda backend: CandidateBlocks count above the stride " +
                                std::to_string(a.stride));
  }
  SPARK_ASSIGN_OR_RETURN(const int32_t* count, b_.Stage(a.count));
  const int64_t floats = kernels::CandidateBlockScratchFloats(rows, a.stride, a.block_size);
  SPARK_ASSIGN_OR_RETURN(Buffer scratch, b_.Scratch(std::max<int64_t>(floats, 1) * sizeof(float)));
  if (!b_.launching()) return Status::Ok();
  return kernels::CandidateBlockMask(a.scores, count, rows, a.stride, a.block_size, a.top_blocks,
                                     scratch.data(), a.mask, b_.stream_);
}

void CudaDeepseekOps::EngramGate(const EngramGateArgs& a) {
  b_.Activate();
  if (!b_.launching()) return;
  b_.Record(
      kernels::EngramGate({a.streams, a.kv, a.weight, a.tokens, a.n, a.hidden, a.eps}, b_.stream_));
}

}  // namespace spark::engine::backend::cuda
