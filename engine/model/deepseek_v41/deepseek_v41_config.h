// config.json of DeepSeek-V4.1: the flat `deepseek_v41_text` form that transformers'
// save_pretrained writes, and the released composite `deepseek_v41` form (text_config,
// vision_config, quantization_config), into ModelConfig with its DeepseekV4Settings (the fields
// V4.1 shares with V4) and DeepseekV41Settings. The source lists and the compress_ratios
// schedule are derived exactly as transformers' DeepseekV41TextConfig derives them when absent;
// what the engine does not implement is refused by key.
// Thread-safety: pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "engine/core/model_config.h"

namespace spark::engine::model::dsv41 {

// InvalidArgument listing every bad key (of text_config.* for the composite form).
Result<core::ModelConfig> ParseDeepseekV41Config(const nlohmann::json& doc,
                                                 const std::string& path);

// What a checkpoint holds for DSpark drafting, for refusals and `spark-engine info --model`:
// "checkpoint has 3 DSpark draft layers (mtp.0..2: block 5, noise token 128799, Markov rank 256,
// 128 experts top 3, reading backbone layers 37, 38, 39)", or that it has none (any model type).
std::string DescribeDspark(const core::ModelConfig& config);

}  // namespace spark::engine::model::dsv41
