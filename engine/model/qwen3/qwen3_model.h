// Qwen3Model: the forward pass of Qwen3 (dense) and Qwen3-MoE on any Backend.
//
// Per layer: RMSNorm -> q/k/v (column-parallel) -> per-head RMSNorm of q and k -> RoPE -> write
// K/V into the paged cache -> causal GQA attention -> o (row-parallel) -> all-reduce -> residual;
// RMSNorm -> SwiGLU MLP or MoE (row-parallel out) -> all-reduce -> residual. Embedding and lm_head
// are vocabulary-parallel: an all-reduce after the embedding, an all-gather of the logits.
// The backend's fused ops carry it: q/k/v in one Linear over the stacked matrix (LinearMany over
// fp8's three), per-head norm + RoPE and the KV cache write in one QkNormRopeWriteKv that reads
// the stacked rows, gate/up with SiLU-mul in one LinearSiluMul, and each residual add fused
// with the norm after it: LinearAddRmsNorm on one rank, AllReduceAddRmsNorm (the all-reduce
// too) under tensor parallelism.
// Thread-safety: one thread at a time (see Model).
#pragma once

#include <memory>

#include "engine/model/model.h"
#include "engine/model/qwen3/qwen3_weights.h"

namespace spark::engine::model::qwen3 {

class Qwen3Model : public Model {
 public:
  Qwen3Model(core::ModelConfig config, Qwen3Weights weights, backend::Backend& backend,
             comm::Communicator* comm, const ModelOptions& options);

  const core::ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override;
  Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                 std::vector<float>* logits) override;
  Status ForwardArgMax(const ForwardBatch& batch, PagedKvCache& cache,
                       std::vector<int32_t>* ids) override;
  // On the backend: each step's pairs stay in backend memory for the next step's embedding
  // (ids_from_last), and leave it through Backend::DownloadLater. At most kMaxLaunchRows rows.
  static constexpr int64_t kMaxLaunchRows = 4096;
  Status LaunchArgMax(const ForwardBatch& batch, PagedKvCache& cache, bool ids_from_last) override;
  Status TakeArgMax(std::vector<int32_t>* ids) override;
  // Dense layers only (MoE reads expert counts back), and under tensor parallelism collectives
  // that may be captured (the peer all-reduce of GPUs on one host).
  std::string WhyNoDecodeGraphs() const override;
  // Qwen3 keeps nothing but the paged KV cache: a rejected draft token's K/V sits past the
  // sequence's end, where the next token overwrites it before attention reads it.
  std::string WhyNoSpeculation() const override { return ""; }

 private:
  struct Workspace;

  Status AllReduce(float* data, size_t count);
  // Embedding and every layer: the last hidden states in ws.h. The ids come from the batch, or
  // with fed_pairs from ArgMax pairs in backend memory ([world][tokens][2]).
  Status Hidden(const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws,
                const float* fed_pairs = nullptr);
  // lm_head over the `rows` rows FinalNorm left in ws.x, and their ArgMax pairs (all-gathered
  // over the ranks) into out [world][rows][2].
  Status ArgMaxPairs(int64_t rows, Workspace& ws, float* out);
  // Final norm of the rows that need logits (every token, or each sequence's last) into ws.x;
  // returns their count.
  int64_t FinalNorm(const ForwardBatch& batch, Workspace& ws);
  // This rank's attention heads over `cache` (scale 1 / sqrt(head_dim)).
  backend::AttentionShape AttentionShapeOf(const PagedKvCache& cache) const;
  // q/k/v, attention, and the output projection added into ws.h with the MLP's input norm
  // written to ws.x.
  Status Attention(int layer, const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws);
  // The MLP (or MoE) of `layer` on ws.x, added into ws.h, and RmsNorm(ws.h) with `next_norm`
  // into ws.x when it is not null (the next layer's input norm, or the final norm).
  Status Mlp(int layer, int64_t n, const float* next_norm, Workspace& ws);
  // The communicator for fused collectives, null on one rank.
  comm::Communicator* Collectives() const;
  // Whether the output projections add into the residual themselves (ModelOptions::fuse_residual):
  // one rank, no MoE layer (Backend::LinearAddRmsNorm); otherwise Linear, then
  // Backend::AllReduceAddRmsNorm.
  bool FusesResidual() const;
  Status Logits(const ForwardBatch& batch, Workspace& ws, std::vector<float>* logits);

  core::ModelConfig config_;
  Qwen3Weights w_;
  const bool dense_;  // no MoE layer (decided once from w_: steps ask per layer)
  backend::Backend& backend_;
  comm::Communicator* comm_;
  ModelOptions options_;
  // LaunchArgMax's pairs, [world][kMaxLaunchRows][2] (allocated with the model, outside any
  // graph step, as they outlive steps).
  Result<backend::Buffer> feed_;
};

}  // namespace spark::engine::model::qwen3
