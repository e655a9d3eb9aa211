// config.json of model_type "deepseek_v4": transformers' DeepseekV4Config (layer_types,
// mlp_layer_types, compress_rates, rope_parameters with main/compress tables) and the legacy keys
// of the released checkpoints (compress_ratios, num_hash_layers, rope_scaling), into ModelConfig
// with its DeepseekV4Settings. What the engine does not implement is refused by key.
// Thread-safety: pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/core/config_reader.h"
#include "engine/core/model_config.h"

namespace spark::engine::model::dsv4 {

// InvalidArgument listing every bad key.
Result<core::ModelConfig> ParseDeepseekV4Config(const nlohmann::json& doc, const std::string& path);

// The two RoPE tables shared by V4 and V4.1: rope_theta / compress_rope_theta and
// rope_parameters ({"main", "compress"}) or a flat rope_parameters / rope_scaling holding the
// compress table's YaRN keys, into c->rope_theta and c->dsv4. Each bad key is recorded in `r`.
void ReadDeepseekRope(const nlohmann::json& doc, core::ConfigReader& r, core::ModelConfig* c);

}  // namespace spark::engine::model::dsv4
