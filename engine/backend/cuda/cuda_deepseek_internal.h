// Helpers the files of CudaDeepseekOps share (not part of its interface): the op arguments'
// cache fields and RoPE tables in the kernels' terms, the staging room of an op's host spans,
// and the refusal of ops whose launch shape depends on the step's host data inside a graph step.
#pragma once

#include <string>

#include "base/status.h"
#include "engine/backend/cuda/device_memory.h"
#include "engine/backend/deepseek_op_args.h"
#include "kernels/deepseek_cache.h"

namespace spark::engine::backend::cuda::internal {

// The staging room the spans take (each rounded as DeviceMemory stages it): what an op that
// stages several spans reserves first (CudaBackend::ReserveStaging).
template <typename... Spans>
size_t StagedBytes(const Spans&... spans) {
  return (size_t{0} + ... + DeviceMemory::Align(spans.size_bytes()));
}

inline kernels::CacheRows Rows(const CacheField& f) {
  return {f.base, f.stride, f.offset, f.width};
}

inline kernels::TrailingRope Rope(const RopeTable& t, bool inverse) {
  return {t.inv_freq, t.rope_dim, t.scale, inverse};
}

// Compress, IndexerTopK, SparseAttention and CandidateBlocks size their launches and staged
// lists from the step's candidate counts, which a graph replay could not change.
inline Status RefuseInGraph(const char* op) {
  return FailedPreconditionError(std::string("cuda backend: DeepSeek ") + op +
                                 " does not run inside a graph step (its launch depends on the "
                                 "step's candidate lists); run DeepSeek decode steps eagerly");
}

}  // namespace spark::engine::backend::cuda::internal
