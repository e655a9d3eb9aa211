// The DeepSeek-V4 family's row of the model table (model_family.h): model_type deepseek_v4 on the
// CPU reference backend, fp32 weights (quantised checkpoints dequantised at load) and the fp32
// per-token cache record of cache_layout.h.
#pragma once

#include "engine/model/model_family.h"

namespace spark::engine::model::dsv4 {

extern const ModelFamily kDeepseekV4Family;

// Bytes one rank holds as the CPU reference keeps them (the row's `memory`): fp32 weights
// (footprint.h's HeldWeightBytesPerRank) and the per-token record of every layer.
Result<MemoryFootprint> DeepseekV4Memory(const core::ModelConfig& config, const MemoryQuery& query);
Result<int64_t> DeepseekV4StepMemory(const core::ModelConfig& config, const MemoryQuery& query,
                                     const StepShape& shape);
// footprint.h's serving layout (the released FP8/FP4 weights, bf16 compressed cache).
Result<MemoryFootprint> DeepseekV4ServingMemory(const core::ModelConfig& config,
                                                const MemoryQuery& query);

}  // namespace spark::engine::model::dsv4
