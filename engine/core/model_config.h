// ModelConfig: the architecture of a checkpoint, read from its Hugging Face config.json.
//
// Supported model_type values: "qwen3" (dense) and "qwen3_moe". The struct is shaped for what
// comes next (DeepSeek-V4): a per-layer list says each layer's attention and MLP kind, MoE
// settings include shared experts, and the residual stream count is explicit. Keys that would
// change the numerics but are not implemented (rope_scaling, sliding windows, attention biases,
// other activations) are rejected with the file and key named rather than silently ignored;
// keys that do not affect the forward pass (architectures, torch_dtype, ...) are ignored.
// Thread-safety: plain values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::engine::core {

enum class AttentionType { kFull };   // later: kSliding, kCompressedSparse, ...
enum class MlpType { kDense, kMoe };  // later: kHashMoe

struct LayerSpec {
  AttentionType attention = AttentionType::kFull;
  MlpType mlp = MlpType::kDense;
};

struct MoeConfig {
  int num_experts = 0;
  int top_k = 0;
  int intermediate_size = 0;    // per routed expert
  bool norm_topk_prob = false;  // renormalise the top-k softmax weights to sum to 1
  int num_shared_experts = 0;   // Qwen3-MoE: 0
  int shared_intermediate_size = 0;
};

struct ModelConfig {
  std::string model_type;  // "qwen3" or "qwen3_moe"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // dense MLP layers
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 1e6;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qk_norm = true;       // Qwen3: RMSNorm over each head of q and k before RoPE
  int residual_streams = 1;  // DeepSeek-V4: hc_mult
  std::vector<int> eos_token_ids;
  MoeConfig moe;
  std::vector<LayerSpec> layers;  // num_layers entries

  // InvalidArgument listing every inconsistent field ("config.json: num_key_value_heads: ...").
  Status Validate(const std::string& path) const;
};

// Parses config.json text. `path` only names the file in errors. InvalidArgument for bad JSON,
// a missing or ill-typed key, an unsupported model_type or an unsupported feature.
Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path);

// Reads <dir>/config.json. NotFound when it is missing.
Result<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace spark::engine::core
