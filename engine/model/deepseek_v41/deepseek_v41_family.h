// The DeepSeek-V4.1 family's row of the model table (model_family.h): model types deepseek_v41
// (the released composite config) and deepseek_v41_text (save_pretrained's flat one) on the CPU
// reference backend, fp32 weights (FP8 / FP4 checkpoints dequantised at load, Engram tables read
// by row from the mapped checkpoint) and the fp32 per-token cache record of cache_layout.h.
#pragma once

#include "engine/model/model_family.h"

namespace spark::engine::model::dsv41 {

extern const ModelFamily kDeepseekV41Family;

// Bytes one rank holds as the CPU reference keeps them (the row's `memory`): fp32 weights
// without the Engram tables (they stay in the page cache, mapped) and the per-token record of
// every layer (nothing per sequence beyond it).
Result<MemoryFootprint> DeepseekV41Memory(const core::ModelConfig& config, const MemoryQuery& q);
Result<int64_t> DeepseekV41StepMemory(const core::ModelConfig& config, const MemoryQuery& q,
                                      const StepShape& shape);
// footprint.h's serving layout; the Engram tables as mapped bytes.
Result<MemoryFootprint> DeepseekV41ServingMemory(const core::ModelConfig& config,
                                                 const MemoryQuery& q);

}  // namespace spark::engine::model::dsv41
