// Placeholders of the ops still to be written (each records Unimplemented).
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"

namespace spark::engine::backend::cuda {

void CudaDeepseekOps::Rope(float*, std::span<const int32_t>, int, int, const RopeTable&, bool) {
  b_.Record(UnimplementedError("cuda backend: Rope is not written yet"));
}

void CudaDeepseekOps::WriteField(const float*, std::span<const int64_t>, const CacheField&) {
  b_.Record(UnimplementedError("cuda backend: WriteField is not written yet"));
}

void CudaDeepseekOps::WriteCompressorInputs(const CompressorInputs&, std::span<const int32_t>, std::span<const int64_t>) {
  b_.Record(UnimplementedError("cuda backend: WriteCompressorInputs is not written yet"));
}

void CudaDeepseekOps::Compress(const CompressArgs&) {
  b_.Record(UnimplementedError("cuda backend: Compress is not written yet"));
}

void CudaDeepseekOps::IndexerTopK(const IndexerArgs&) {
  b_.Record(UnimplementedError("cuda backend: IndexerTopK is not written yet"));
}

void CudaDeepseekOps::SparseAttention(const SparseAttentionArgs&) {
  b_.Record(UnimplementedError("cuda backend: SparseAttention is not written yet"));
}

void CudaDeepseekOps::HcExpand(const float*, int64_t, int, int, float*) {
  b_.Record(UnimplementedError("cuda backend: HcExpand is not written yet"));
}

void CudaDeepseekOps::HcMix(const HcMixArgs&) {
  b_.Record(UnimplementedError("cuda backend: HcMix is not written yet"));
}

void CudaDeepseekOps::HcCollapse(const float*, const float*, int64_t, int, int, float*) {
  b_.Record(UnimplementedError("cuda backend: HcCollapse is not written yet"));
}

void CudaDeepseekOps::HcPost(float*, const float*, const float*, const float*, int64_t, int, int) {
  b_.Record(UnimplementedError("cuda backend: HcPost is not written yet"));
}

void CudaDeepseekOps::FakeQuant(const FakeQuantArgs&) {
  b_.Record(UnimplementedError("cuda backend: FakeQuant is not written yet"));
}

void CudaDeepseekOps::CandidateBlocks(const CandidateBlockArgs&) {
  b_.Record(UnimplementedError("cuda backend: CandidateBlocks is not written yet"));
}

void CudaDeepseekOps::EngramGate(const EngramGateArgs&) {
  b_.Record(UnimplementedError("cuda backend: EngramGate is not written yet"));
}

}  // namespace spark::engine::backend::cuda
