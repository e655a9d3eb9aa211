// The DSpark draft stack of a DeepSeek-V4.1 checkpoint (`mtp.{j}.*`, j < num_nextn_predict_layers),
// as vLLM's DSparkDeepseekV4ForCausalLM reads it (docs/speculative.md): per stage one V4.1
// decoder block with the backbone's tensor names and shapes, window-only attention (no
// compressor, indexer or Engram) and its own MoE size (dspark_n_routed_experts routed experts,
// top dspark_num_experts_per_tok, router bias, no hash routing); in stage 0 the context combiner
// main_proj [hidden, hidden x targets] and main_norm; in the last stage the head norm, the
// Markov factors markov_head.embed / markov_head.head [vocab, rank]. The optional
// confidence_head.proj [1, hidden + rank] (used by vLLM only for adaptive verification) and a
// stage's ffn.gate.bias_vl (image tokens) are checked when present and not kept. Embedding and lm_head are the target's. Under tensor
// parallelism the blocks are sharded as the backbone's (heads, output groups, experts or expert
// channels, shared-expert channels); the combiner, norms and heads are replicated.
// Thread-safety: plain values; read-only after loading.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv41 {

struct DraftWeights {
  dsv4::Weights stack;                 // layers = the draft blocks; no embed, head or norms
  std::vector<dsv4::Mat> main_proj;    // per target layer id: its [hidden, hidden] columns
  dsv4::Vec main_norm, norm;           // [hidden]
  dsv4::Vec markov_embed, markov_head;  // [vocab, rank] each
};

// The model config of the draft blocks: the backbone's with the draft MoE size.
core::ModelConfig DraftConfig(const core::ModelConfig& config);

// NotFound naming the tensor when a stage is incomplete, InvalidArgument for a shape that
// disagrees with config.json or an mtp.* tensor nothing reads, FailedPrecondition when the
// checkpoint declares no draft layers.
Result<DraftWeights> LoadDraftWeights(const dsv4::TensorSource& source,
                                      const core::ModelConfig& config, dsv4::WeightTypes types,
                                      const TpShard& shard = {},
                                      MoeSharding moe = MoeSharding::kByExpert,
                                      dsv4::ReadObserver on_read = {});

}  // namespace spark::engine::model::dsv41
