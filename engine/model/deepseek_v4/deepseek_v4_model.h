// DeepseekV4Model: the DeepSeek-V4 forward pass on the CPU reference backend.
//
// Embedding -> N residual streams; per layer: mHC pre -> attn_norm -> attention (sliding, CSA
// or HCA; attention.h) -> mHC post; mHC pre -> ffn_norm -> MoE (moe.h) -> mHC post; then
// hc_head -> norm -> lm_head. All per-sequence decode state is kept per token in the paged KV
// cache (cache_layout.h), so continuous batching, chunked prefill split anywhere and decode
// work without any other state.
// Tensor parallelism (weights.h says what each rank holds): the embedding is vocabulary-parallel
// (all-reduce), attention and MoE each end in one all-reduce of partial sums, and the logits are
// all-gathered, so every rank computes identical routing and top-k. Limit: host-memory backends
// only (the weights stay fp32 on the host and some ops are plain loops here).
// Thread-safety: one thread at a time (see Model).
#pragma once

#include <memory>

#include "engine/model/deepseek_v4/attention.h"
#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/deepseek_v4/moe.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/model.h"

namespace spark::engine::model::dsv4 {

class DeepseekV4Model : public Model {
 public:
  DeepseekV4Model(core::ModelConfig config, Weights weights, backend::Backend& backend,
                  comm::Communicator* comm);

  const core::ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override;
  Status Forward(const ForwardBatch& batch, PagedKvCache& cache,
                 std::vector<float>* logits) override;

 private:
  Status AllReduce(std::vector<float>& data);
  Status Logits(const std::vector<float>& head_in, int64_t rows, std::vector<float>* logits);

  core::ModelConfig config_;
  Weights w_;
  backend::Backend& backend_;
  comm::Communicator* comm_;  // null on one rank
  CacheLayout layout_;
  Attention attention_;
  Moe moe_;
};

}  // namespace spark::engine::model::dsv4
