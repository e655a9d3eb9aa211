// ModelConfig: the architecture of a checkpoint, as the families' config.json parsers
// (engine/model/<family>/, dispatched by engine/model/model_family.h) fill it in.
//
// A per-layer list says each layer's attention and MLP kind, MoE settings include shared
// experts, and the residual stream count is explicit; DeepSeek-V4's own settings are in
// DeepseekV4Settings. The parsers refuse keys that would change the numerics but are not
// implemented, naming the file and key; keys that do not affect the forward pass
// (architectures, torch_dtype, ...) are ignored.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::engine::core {

// DeepSeek-V4: kSliding = window only; kCompressedSparse = window + CSA (overlapping pooling,
// lightning indexer top-k); kHeavilyCompressed = window + HCA (every visible entry).
enum class AttentionType { kFull, kSliding, kCompressedSparse, kHeavilyCompressed };
// kHashMoe: routed experts chosen by a token-id table (tid2eid), weighted by the router.
enum class MlpType { kDense, kMoe, kHashMoe };

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

// YaRN scaling of a RoPE table (transformers' "yarn" rope_type).
struct YarnSettings {
  bool enabled = false;
  double factor = 1.0;
  int original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // multiplies cos and sin; V4 forces 1.0
};

// DeepSeek-V4 architecture settings (transformers' DeepseekV4Config); unused for other types.
struct DeepseekV4Settings {
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int rope_head_dim = 0;  // trailing channels of each head that get RoPE
  int compress_rate_csa = 4;
  int compress_rate_hca = 128;
  int sliding_window = 0;  // keys a query sees in the window, itself included
  int hc_sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  float swiglu_limit = 0;  // clamps gate (above) and up (both sides); 0 = no clamp
  float routed_scaling_factor = 1.0f;
  double compress_rope_theta = 160000.0;  // the "compress" table (CSA/HCA layers)
  YarnSettings compress_yarn;             // the "main" table (sliding layers) has no scaling
};

// DeepSeek-V4.1 (transformers' DeepseekV41TextConfig) beyond the V4 fields it shares (q/o
// ranks, window, mHC, indexer sizes, router scaling and clamp, RoPE tables: DeepseekV4Settings).
// The source lists are as the reference derives them when config.json leaves them out.
struct DeepseekV41Settings {
  std::vector<int> compress_ratios;         // per backbone layer: 0 window only, 1, or r > 1
  std::vector<int> kv_source_layer_ids;     // layers that own a compressor (ascending)
  std::vector<int> index_source_layer_ids;  // layers that run the indexer (ascending)
  int candidate_source_layer_id = -1;       // two-level top-k source; < 0: none
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  float gate_temp = 1.0f;  // router logits are divided by it
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;  // table rows per Engram layer
  int64_t engram_vocab_size = 0;               // primes are drawn above it
  int engram_max_ngram_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 0;
  int engram_compressed_vocab_size = 0;
  // DSpark draft stack (mtp.*), read and checked but not run (docs/speculative.md): its layer
  // count, tokens drafted per block, the noise (mask) token filling the block after its anchor,
  // the Markov head's rank, the draft MoE's experts and top-k (0 in config.json: the
  // backbone's, resolved here) and the backbone layers whose inputs feed it.
  int num_nextn_predict_layers = 0;
  int dspark_block_size = 0;
  int dspark_noise_token_id = -1;
  int dspark_markov_rank = 0;
  int dspark_n_routed_experts = 0;
  int dspark_num_experts_per_tok = 0;
  std::vector<int> dspark_target_layer_ids;

  // The KV source a compressed layer reads (the latest at or before it); -1 for ratio 0.
  int KvSourceOf(int layer) const;
  // The index source whose top-k a compressed layer uses (the latest at or before it); -1: none.
  int IndexSourceOf(int layer) const;
  bool IsKvSource(int layer) const;
  bool IsIndexSource(int layer) const;
  int EngramIndex(int layer) const;  // position in engram_layer_ids, or -1
};

struct ModelConfig {
  std::string model_type;  // config.json's, e.g. "qwen3_moe"
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
  DeepseekV4Settings dsv4;
  DeepseekV41Settings dsv41;

  // InvalidArgument listing every inconsistent field ("config.json: num_key_value_heads: ...").
  Status Validate(const std::string& path) const;
};

}  // namespace spark::engine::core
