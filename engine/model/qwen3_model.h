// Qwen3Model: the forward pass of Qwen3 (dense) and Qwen3-MoE on any Backend.
//
// Per layer: RMSNorm -> q/k/v (column-parallel) -> per-head RMSNorm of q and k -> RoPE -> write
// K/V into the paged cache -> causal GQA attention -> o (row-parallel) -> all-reduce -> residual;
// RMSNorm -> SwiGLU MLP or MoE (row-parallel out) -> all-reduce -> residual. Embedding and lm_head
// are vocabulary-parallel: an all-reduce after the embedding, an all-gather of the logits.
// Thread-safety: one thread at a time (see Model).
#pragma once

#include <memory>

#include "engine/model/model.h"
#include "engine/model/qwen3_weights.h"

namespace spark::engine::model {

class Qwen3Model : public Model {
 public:
  Qwen3Model(core::ModelConfig config, Qwen3Weights weights, backend::Backend& backend,
             comm::Communicator* comm, const ModelOptions& options);

  const core::ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override;
  Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                 std::vector<float>* logits) override;

 private:
  struct Workspace;

  Status AllReduce(float* data, size_t count);
  Status Attention(int layer, const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws);
  Status Mlp(int layer, int64_t n, Workspace& ws);
  Status Logits(const ForwardBatch& batch, Workspace& ws, std::vector<float>* logits);

  core::ModelConfig config_;
  Qwen3Weights w_;
  backend::Backend& backend_;
  comm::Communicator* comm_;
  ModelOptions options_;
};

}  // namespace spark::engine::model
