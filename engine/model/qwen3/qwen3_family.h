// The Qwen3 family's row of the model table (model_family.h): dense Qwen3 and Qwen3-MoE on the
// CPU and CUDA backends, with fp32, bf16 or fp8 weights and an fp32 or bf16 KV cache.
#pragma once

#include "engine/model/model_family.h"

namespace spark::engine::model::qwen3 {

extern const ModelFamily kQwen3Family;

// Bytes one rank holds (the row's `memory`): every matrix in query.weight_dtype (fp8 with its
// 128 x 128 block scales), embedding, norms and router in fp32, K and V per token in
// query.kv_dtype. Exactly what LoadModel allocates.
Result<MemoryFootprint> Qwen3Memory(const core::ModelConfig& config, const MemoryQuery& query);
Result<int64_t> Qwen3StepMemory(const core::ModelConfig& config, const MemoryQuery& query,
                                const StepShape& shape);

}  // namespace spark::engine::model::qwen3
