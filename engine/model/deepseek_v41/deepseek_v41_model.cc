#include "engine/model/deepseek_v41/deepseek_v41_model.h"

#include <algorithm>

#include "engine/model/deepseek_v4/logits.h"
#include "engine/model/deepseek_v41/hc_site.h"

namespace spark::engine::model::dsv41 {

DeepseekV41Model::DeepseekV41Model(core::ModelConfig config,
                                   std::unique_ptr<dsv4::TensorSource> source, Weights weights,
                                   std::unique_ptr<EngramHashing> hashing,
                                   std::vector<int32_t> token_map, backend::Backend& backend,
                                   comm::Communicator* comm, std::optional<DraftWeights> draft)
    : config_(std::move(config)),
      source_(std::move(source)),
      hashing_(std::move(hashing)),
      backend_(backend),
      ops_(backend.deepseek_ops()),
      comm_(comm),
      layout_(config_, draft ? config_.dsv41.num_nextn_predict_layers : 0) {
  if (ops_ == nullptr) {
    ready_ = FailedPreconditionError("deepseek_v41 needs a backend with the DeepSeek ops; '" +
                                     backend.name() + "' has none");
    return;
  }
  Result<BackendWeights> uploaded = UploadWeights(std::move(weights), config_, backend);
  if (!uploaded.ok()) {
    ready_ = uploaded.status();
    return;
  }
  w_ = std::move(*uploaded);
  Result<backend::Buffer> stream0 = backend_.Allocate(config_.residual_streams);
  if (!stream0.ok()) {
    ready_ = stream0.status();
    return;
  }
  stream0_ = std::move(*stream0);
  std::vector<float> one_hot(config_.residual_streams, 0.0f);
  one_hot[0] = 1.0f;
  backend_.Upload(one_hot, stream0_.data());
  attention_ = std::make_unique<Attention>(config_, w_, layout_, backend_, *ops_);
  moe_ = std::make_unique<dsv4::Moe>(config_, w_.base, backend_, *ops_);
  if (hashing_ != nullptr) {
    engram_ = std::make_unique<Engram>(config_, w_, *hashing_, std::move(token_map), layout_,
                                       backend_, *ops_);
  }
  if (draft) {
    dspark_ = std::make_unique<DSpark>(config_, std::move(*draft), layout_, w_.base, stream0_,
                                       backend_, *ops_, comm_);
    ready_ = dspark_->status();
  }
}

KvCacheSpec DeepseekV41Model::kv_cache_spec() const {
  return layout_.spec();
}

Status DeepseekV41Model::Check(const ForwardBatch& batch, const PagedKvCache& cache) const {
  SPARK_RETURN_IF_ERROR(ready_);
  return dsv4::CheckStep(batch, cache, layout_.spec(), config_.vocab_size);
}

Status DeepseekV41Model::Forward(const ForwardBatch& batch, PagedKvCache& cache,
                                 std::vector<float>* logits) {
  SPARK_RETURN_IF_ERROR(Check(batch, cache));
  const int64_t n = batch.num_tokens();
  const int hidden = config_.hidden_size, streams = config_.residual_streams;
  const StepPlan plan = PlanStep(batch, cache.block_size(), config_.dsv41);
  SPARK_ASSIGN_OR_RETURN(Workspace ws,
                         AllocateWorkspace(backend_, config_, w_.base.ranges, n, plan.stride,
                                           hashing_ ? hashing_->columns() : 0));
  if (engram_ != nullptr) SPARK_RETURN_IF_ERROR(engram_->Prepare(batch, cache, ws));
  const dsv4::ShardRanges& r = w_.base.ranges;
  backend_.Embedding(w_.base.embed.data(), r.vocab.begin, r.vocab.size, hidden, batch.token_ids,
                     ws.block_out.data());
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
  ops_->HcExpand(ws.block_out.data(), n, streams, hidden, ws.streams.data());
  // Every token's first pre: the one-hot row (an embedding lookup: nothing uploaded in a step).
  backend_.Embedding(stream0_.data(), 0, 1, streams, std::vector<int32_t>(n, 0), ws.pre_prev.data());
  if (dspark_ != nullptr) SPARK_RETURN_IF_ERROR(dspark_->BeginStep(n));
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    if (dspark_ != nullptr) {
      if (const int k = dspark_->CaptureIndex(layer); k >= 0) dspark_->Capture(k, ws);
    }
    SPARK_RETURN_IF_ERROR(Layer(layer, batch, plan, cache, ws));
  }
  if (dspark_ != nullptr) dspark_->StoreContext(batch, cache);
  return Logits(Head(batch, ws), ws, logits);
}

Status DeepseekV41Model::DraftTokens(std::span<const DraftBlock> blocks, PagedKvCache& cache,
                                     std::vector<std::vector<int32_t>>* drafts) {
  SPARK_RETURN_IF_ERROR(ready_);
  if (dspark_ == nullptr) return Model::DraftTokens(blocks, cache, drafts);
  if (cache.spec().num_layers != layout_.num_layers()) {
    return InvalidArgumentError("DSpark: the KV cache holds " +
                                std::to_string(cache.spec().num_layers) + " layers, the model " +
                                std::to_string(layout_.num_layers()));
  }
  return dspark_->Draft(blocks, cache, drafts);
}

// One block with the one-site lag: the attention input collapses with the previous site's pre,
// the FFN input with the attention site's; the FFN site's pre is kept for the next layer.
Status DeepseekV41Model::Layer(int layer, const ForwardBatch& batch, const StepPlan& plan,
                               PagedKvCache& cache, Workspace& ws) {
  const int64_t n = ws.tokens;
  const int hidden = config_.hidden_size, streams = config_.residual_streams;
  const dsv4::LayerBuffers& l = w_.base.layers[layer];
  if (w_.engram_of_layer[layer] >= 0) engram_->Apply(w_.engram_of_layer[layer], ws);
  MixSite(*ops_, config_, l.hc_attn, &ws.pre, ws);
  CollapseNorm(backend_, *ops_, config_, ws.pre_prev, l.attn_norm, ws);
  attention_->Forward(layer, batch, plan, cache, ws);
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
  ops_->HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), n, streams,
               hidden);
  MixSite(*ops_, config_, l.hc_ffn, &ws.pre_prev, ws);
  CollapseNorm(backend_, *ops_, config_, ws.pre, l.ffn_norm, ws);
  moe_->Forward(layer, batch.token_ids,
                {ws.block_in.data(), ws.block_out.data(), ws.router.data(), ws.expert_ids.data(),
                 ws.expert_weights.data(), n});
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, n * hidden));
  ops_->HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), n, streams,
               hidden);
  return Status::Ok();
}

int64_t DeepseekV41Model::Head(const ForwardBatch& batch, Workspace& ws) {
  const int n = config_.residual_streams, hidden = config_.hidden_size;
  const int64_t rows = batch.num_logit_rows();
  auto collapse = [&](int64_t src, int64_t r, int64_t count) {
    ops_->HcCollapse(ws.streams.data() + src * n * hidden, ws.pre_prev.data() + src * n, count, n,
                     hidden, ws.block_in.data() + r * hidden);
  };
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
  backend_.RmsNorm(ws.block_in.data(), w_.base.final_norm.data(), rows, hidden,
                   config_.rms_norm_eps, ws.block_in.data());
  return rows;
}

Status DeepseekV41Model::AllReduce(backend::Buffer& data, int64_t count) {
  if (comm_ == nullptr || comm_->world_size() == 1) return Status::Ok();
  return comm_->AllReduceSum(data.data(), static_cast<size_t>(count));
}

Status DeepseekV41Model::Logits(int64_t rows, Workspace& ws, std::vector<float>* logits) {
  return dsv4::VocabParallelLogits(backend_, comm_, w_.base, config_, ws.block_in, rows, logits);
}

}  // namespace spark::engine::model::dsv41
