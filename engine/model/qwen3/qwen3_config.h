// config.json of model_type "qwen3" (dense) and "qwen3_moe": the ModelConfig fields and the
// per-layer MLP kinds (decoder_sparse_step, mlp_only_layers). Keys that would change the
// numerics but are not implemented (rope_scaling, sliding windows, attention biases, other
// activations) are refused with the key named.
// Thread-safety: pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/core/model_config.h"

namespace spark::engine::model::qwen3 {

// InvalidArgument listing every bad key ("config.json: num_key_value_heads: ...").
Result<core::ModelConfig> ParseQwen3Config(const nlohmann::json& doc, const std::string& path);

}  // namespace spark::engine::model::qwen3
