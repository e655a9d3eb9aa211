// The weights of a DeepSeek-V4 rank in backend memory: the host Weights the loader returns
// (weights.h), uploaded as fp32 buffers, plus the small tables the forward needs beside them
// (RoPE frequencies, the unit weight of the per-head query norm). The forward reads only these,
// so the model runs on any backend with DeepseekOps.
// Shapes and sharding as in weights.h; tid2eid holds its expert ids as floats (exact), the form
// DeepseekOps::Route reads.
// Thread-safety: read-only after upload.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/deepseek_op_args.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {

using backend::Buffer;

struct HcBuffers {
  Buffer fn, base, scale;
};

struct CompressorBuffers {
  Buffer wkv, wgate, ape, norm;
};

struct LayerBuffers {
  core::AttentionType attention = core::AttentionType::kSliding;
  core::MlpType mlp = core::MlpType::kMoe;
  HcBuffers hc_attn, hc_ffn;
  Buffer attn_norm, ffn_norm, wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
  CompressorBuffers compressor, index_compressor;
  Buffer index_wq_b, index_weights, router, router_bias, tid2eid;
  std::vector<Buffer> expert_gate_up, expert_down;
  Buffer shared_gate_up, shared_down;
};

struct BackendWeights {
  ShardRanges ranges;
  Buffer embed, head, final_norm, hc_head_fn, hc_head_base, hc_head_scale;
  Buffer unit_head_norm;            // [head_dim] of ones: V4's per-head query norm has no weight
  Buffer main_freq, compress_freq;  // inv_freq of the two RoPE tables
  float main_scale = 1.0f, compress_scale = 1.0f;
  int rope_dim = 0;
  std::vector<LayerBuffers> layers;

  const Buffer& lm_head() const { return head.empty() ? embed : head; }
  backend::RopeTable main_rope() const { return {main_freq.data(), rope_dim, main_scale}; }
  backend::RopeTable compress_rope() const {
    return {compress_freq.data(), rope_dim, compress_scale};
  }
};

// One matrix into backend memory in the type `types` gives it (its released bytes when packed,
// else fp32 or bf16 values), emptying `host`. The backend's allocation errors.
Result<Buffer> UploadMatrix(backend::Backend& backend, const WeightTypes& types, Mat& host);

// Uploads `host` tensor by tensor, freeing each host copy once it is in backend memory (the peak
// is the host weights plus one tensor). ResourceExhausted when the backend runs out of memory.
Result<BackendWeights> UploadWeights(Weights host, const core::ModelConfig& config,
                                     backend::Backend& backend);

}  // namespace spark::engine::model::dsv4
