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

}  // namespace spark::engine::model::dsv41
