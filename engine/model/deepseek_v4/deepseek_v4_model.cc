#include "engine/model/deepseek_v4/deepseek_v4_model.h"

#include <algorithm>

#include "engine/model/deepseek_v4/logits.h"

namespace spark::engine::model::dsv4 {

DeepseekV4Model::DeepseekV4Model(core::ModelConfig config, Weights weights,
                                 backend::Backend& backend, comm::Communicator* comm)
    : config_(std::move(config)),
      backend_(backend),
      ops_(backend.deepseek_ops()),
      comm_(comm),
      layout_(config_) {
  if (ops_ == nullptr) {
    ready_ = FailedPreconditionError("deepseek_v4 needs a backend with the DeepSeek ops; '" +
                                     backend.name() + "' has none");
    return;
  }
  Result<BackendWeights> uploaded = UploadWeights(std::move(weights), config_, backend);
  if (!uploaded.ok()) {
    ready_ = uploaded.status();
    return;
  }
  w_ = std::move(*uploaded);
  attention_ = std::make_unique<Attention>(config_, w_, layout_, backend_, *ops_);
  moe_ = std::make_unique<Moe>(config_, w_, backend_, *ops_);
}

KvCacheSpec DeepseekV4Model::kv_cache_spec() const {
  return layout_.spec();
}

Status DeepseekV4Model::Check(const ForwardBatch& batch, const PagedKvCache& cache) const {
  SPARK_RETURN_IF_ERROR(ready_);
  return CheckStep(batch, cache, layout_.spec(), config_.vocab_size);
}

Status DeepseekV4Model::Forward(const ForwardBatch& batch, PagedKvCache& cache,
                                std::vector<float>* logits) {
  SPARK_RETURN_IF_ERROR(Check(batch, cache));
  const int64_t n = batch.num_tokens();
  const int hidden = config_.hidden_size, streams = config_.residual_streams;
  SPARK_ASSIGN_OR_RETURN(Workspace ws, AllocateWorkspace(backend_, config_, w_.ranges, n));
  const StepPlan plan = PlanStep(batch, cache.block_size(), config_.dsv4);
  // Vocabulary-parallel embedding: rows of other ranks' tokens stay 0 until the all-reduce.
  backend_.Embedding(w_.embed.data(), w_.ranges.vocab.begin, w_.ranges.vocab.size, hidden,
                     batch.token_ids, ws.block_out.data());
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
  ops_->HcExpand(ws.block_out.data(), n, streams, hidden, ws.streams.data());
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const LayerBuffers& l = w_.layers[layer];
    HyperPre(l.hc_attn, l.attn_norm, ws);
    attention_->Forward(layer, batch, plan, cache, ws);
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
    ops_->HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), n, streams,
                 hidden);
    HyperPre(l.hc_ffn, l.ffn_norm, ws);
    moe_->Forward(layer, batch.token_ids,
                  {ws.block_in.data(), ws.block_out.data(), ws.router.data(), ws.expert_ids.data(),
                   ws.expert_weights.data(), n});
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
    ops_->HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), n, streams,
                 hidden);
  }
  return Logits(Head(batch, ws), ws, logits);
}

void DeepseekV4Model::HyperPre(const HcBuffers& hc, const backend::Buffer& norm, Workspace& ws) {
  const int n = config_.residual_streams, hidden = config_.hidden_size;
  ops_->HcMix({.streams = ws.streams.data(),
               .tokens = ws.tokens,
               .n = n,
               .hidden = hidden,
               .fn = hc.fn.data(),
               .base = hc.base.data(),
               .scale = hc.scale.data(),
               .norm_eps = config_.rms_norm_eps,
               .hc_eps = config_.dsv4.hc_eps,
               .sinkhorn_iters = config_.dsv4.hc_sinkhorn_iters,
               .pre = ws.pre.data(),
               .post = ws.post.data(),
               .comb = ws.comb.data()});
  ops_->HcCollapse(ws.streams.data(), ws.pre.data(), ws.tokens, n, hidden, ws.block_in.data());
  backend_.RmsNorm(ws.block_in.data(), norm.data(), ws.tokens, hidden, config_.rms_norm_eps,
                   ws.block_in.data());
}

int64_t DeepseekV4Model::Head(const ForwardBatch& batch, Workspace& ws) {
  const int n = config_.residual_streams, hidden = config_.hidden_size;
  // Row r of the head collapses token src of the streams (every token, or each sequence's last).
  auto collapse = [&](int64_t src, int64_t r, int64_t count) {
    ops_->HcMix({.streams = ws.streams.data() + src * n * hidden,
                 .tokens = count,
                 .n = n,
                 .hidden = hidden,
                 .fn = w_.hc_head_fn.data(),
                 .base = w_.hc_head_base.data(),
                 .scale = w_.hc_head_scale.data(),
                 .norm_eps = config_.rms_norm_eps,
                 .hc_eps = config_.dsv4.hc_eps,
                 .pre = ws.pre.data() + r * n});
    ops_->HcCollapse(ws.streams.data() + src * n * hidden, ws.pre.data() + r * n, count, n, hidden,
                     ws.block_in.data() + r * hidden);
  };
  const int64_t rows = batch.num_logit_rows();
  if (batch.all_logits || rows == batch.num_tokens()) {
    collapse(0, 0, rows);
  } else {
    int64_t end = 0;
    int64_t r = 0;
    for (const BatchSequence& s : batch.sequences) {  // each sequence's last logits_rows tokens
      end += s.query_len;
      collapse(end - s.logits_rows, r, s.logits_rows);
      r += s.logits_rows;
    }
  }
  backend_.RmsNorm(ws.block_in.data(), w_.final_norm.data(), rows, hidden, config_.rms_norm_eps,
                   ws.block_in.data());
  return rows;
}

Status DeepseekV4Model::AllReduce(backend::Buffer& data, int64_t count) {
  if (comm_ == nullptr || comm_->world_size() == 1) return Status::Ok();
  return comm_->AllReduceSum(data.data(), static_cast<size_t>(count));
}

Status DeepseekV4Model::Logits(int64_t rows, Workspace& ws, std::vector<float>* logits) {
  return VocabParallelLogits(backend_, comm_, w_, config_, ws.block_in, rows, logits);
}

}  // namespace spark::engine::model::dsv4
