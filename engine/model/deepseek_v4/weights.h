// The weights of a DeepSeek-V4 model as the loader reads them: host vectors and matrices (Mat:
// fp32, or FP8 / FP4 as released when WeightTypes keep them), which the model uploads to backend
// memory (backend_weights.h) and then frees.
//
// Loading accepts three namings of the same tensors (weight_names.h holds the one mapping table):
// the released layout ("layers.N.attn.wq_a.weight", FP8 E4M3 + block scales, FP4 experts), the
// same names under "model." (what transformers' save_pretrained writes for this model type), and
// transformers' module names ("model.layers.N.self_attn.q_a_proj.weight", fused expert tensors).
// Quantised tensors are dequantised at load (block_quant.h) unless WeightTypes keep them. Every
// missing, mis-shaped or unexpected tensor is an error naming it, the expected and the found
// shape.
// Tensor parallelism (the plan of docs/deepseek_v4.md): a rank keeps wq_b rows and sinks of its
// heads, the wo_a block of each output group its heads fall in (the block's columns of those
// heads: all of them when the world size divides o_groups), wo_b columns of those groups
// (row-parallel: partial sums, all-reduced), routed experts by expert or by
// intermediate channel, the shared expert by channel, and its vocabulary rows of embed and head.
// Everything else (latents, compressors, indexer, router, mHC, norms) is replicated.
// Thread-safety: read-only after loading.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/matrix.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv4 {

using Vec = std::vector<float>;

// A compressor (of the attention at head_dim, or of the indexer at index_head_dim): per-token
// kv and gate projections [width, hidden] with width = 2 x dim for CSA (two overlapping series)
// and dim for HCA, position bias [ratio, width], RMSNorm weight [dim].
struct CompressorWeights {
  Mat wkv, wgate;
  Vec ape, norm;
};

// mHC site: fn [N(N+2), N*hidden], base [N(N+2)], scale [3].
struct HyperConnectionWeights {
  Vec fn, base, scale;
};

struct LayerWeights {
  core::AttentionType attention = core::AttentionType::kSliding;
  core::MlpType mlp = core::MlpType::kMoe;
  HyperConnectionWeights hc_attn, hc_ffn;
  Vec attn_norm, ffn_norm;  // [hidden]
  Mat wq_a, wq_b;           // [q_lora, hidden], [heads * head_dim, q_lora]
  Vec q_norm;               // [q_lora]
  Mat wkv;                  // [head_dim, hidden]
  Vec kv_norm;              // [head_dim]
  // Per local group i: [o_lora, GroupHeads(i).size * head_dim], one after another (with equal
  // groups: one [groups * o_lora, heads per group * head_dim] matrix).
  Mat wo_a;
  Mat wo_b;   // [hidden, local groups * o_lora]
  Vec sinks;  // [heads]
  CompressorWeights compressor;        // CSA and HCA layers
  CompressorWeights index_compressor;  // CSA layers
  Mat index_wq_b, index_weights;       // [index_heads * index_dim, q_lora], [index_heads, hidden]
  Mat router;                          // [experts, hidden]
  Vec router_bias;                     // [experts] (top-k layers)
  std::vector<int32_t> tid2eid;        // [vocab, top_k] (hash layers)
  std::vector<Mat> expert_gate_up;     // per local expert [2 * channels, hidden]: w1 then w3 rows
  std::vector<Mat> expert_down;        // per local expert [hidden, channels]
  Mat shared_gate_up, shared_down;
};

// Which part of the sharded tensors this rank holds.
struct ShardRanges {
  Range heads, groups, experts, expert_channels, shared_channels, vocab;
  int heads_per_group = 0;
  // Global heads of local group i (groups.begin + i) that this rank holds.
  Range GroupHeads(int64_t i) const {
    const int64_t g = groups.begin + i;
    const int64_t begin = std::max(heads.begin, g * heads_per_group);
    const int64_t end = std::min(heads.end(), (g + 1) * heads_per_group);
    return {begin, end - begin};
  }
};

struct Weights {
  ShardRanges ranges;
  WeightTypes types;                            // what the upload makes of the matrices
  Vec embed;                                    // [vocab.size, hidden] (this rank's rows)
  Mat head;                                     // [vocab.size, hidden]; empty when tied to embed
  Vec final_norm;                               // [hidden]
  Vec hc_head_fn, hc_head_base, hc_head_scale;  // [N, N*hidden], [N], [1]
  std::vector<LayerWeights> layers;
};

// InvalidArgument naming the config key that the world size does not divide.
Result<ShardRanges> PlanShard(const core::ModelConfig& config, const TpShard& shard,
                              MoeSharding moe);

// Called with the stored bytes of each tensor as the loader consumes it (loading progress).
using ReadObserver = std::function<void(uint64_t bytes)>;

// NotFound naming the tensor and every name tried; InvalidArgument for a shape that disagrees
// with config.json (expected and found shapes named), an unexpected tensor or a world size that
// does not divide the sharded dimensions; DataLoss for scales that do not fit their weight.
Result<Weights> LoadWeights(const TensorSource& source, const core::ModelConfig& config,
                            const TpShard& shard = {}, MoeSharding moe = MoeSharding::kByExpert,
                            ReadObserver on_read = {}, WeightTypes types = {});

}  // namespace spark::engine::model::dsv4
