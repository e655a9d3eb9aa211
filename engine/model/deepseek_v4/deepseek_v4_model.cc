#include "engine/model/deepseek_v4/deepseek_v4_model.h"

#include <algorithm>

#include "engine/model/deepseek_v4/hyper_connection.h"
#include "engine/model/deepseek_v4/ops.h"

namespace spark::engine::model::dsv4 {

DeepseekV4Model::DeepseekV4Model(core::ModelConfig config, Weights weights,
                                 backend::Backend& backend, comm::Communicator* comm)
    : config_(std::move(config)),
      w_(std::move(weights)),
      backend_(backend),
      comm_(comm),
      layout_(config_),
      attention_(config_, w_, layout_, backend),
      moe_(config_, w_, backend) {}

KvCacheSpec DeepseekV4Model::kv_cache_spec() const {
  return {config_.num_layers, layout_.kv_width()};
}

Status DeepseekV4Model::Forward(const ForwardBatch& batch, PagedKvCache& cache,
                                std::vector<float>* logits) {
  SPARK_RETURN_IF_ERROR(batch.Validate(cache.block_size(), cache.num_blocks(), config_.vocab_size));
  if (cache.spec().kv_width != layout_.kv_width() ||
      cache.spec().num_layers != config_.num_layers) {
    return InvalidArgumentError("kv cache was made for another model (KV width " +
                                std::to_string(cache.spec().kv_width) + ", expected " +
                                std::to_string(layout_.kv_width()) + ")");
  }
  const int64_t n = batch.num_tokens();
  const int hidden = config_.hidden_size, streams = config_.residual_streams;
  std::vector<float> x(n * streams * hidden), collapsed(n * hidden), y(n * hidden);
  // Vocabulary-parallel embedding: rows of other ranks' tokens stay 0 until the all-reduce.
  backend_.Embedding(w_.embed.data(), w_.ranges.vocab.begin, w_.ranges.vocab.size, hidden,
                     batch.token_ids, y.data());
  SPARK_RETURN_IF_ERROR(AllReduce(y));
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < streams; ++j) {
      std::copy_n(&y[t * hidden], hidden, &x[(t * streams + j) * hidden]);
    }
  }
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const LayerWeights& l = w_.layers[layer];
    std::vector<HyperMix> mix = HyperPre(x.data(), n, config_, l.hc_attn, collapsed.data());
    RmsNormRows(collapsed.data(), n, hidden, l.attn_norm.data(), config_.rms_norm_eps);
    attention_.Forward(layer, collapsed.data(), batch, cache, y.data());
    SPARK_RETURN_IF_ERROR(AllReduce(y));
    HyperPost(x.data(), n, config_, mix, y.data());
    mix = HyperPre(x.data(), n, config_, l.hc_ffn, collapsed.data());
    RmsNormRows(collapsed.data(), n, hidden, l.ffn_norm.data(), config_.rms_norm_eps);
    moe_.Forward(layer, collapsed.data(), batch.token_ids, y.data());
    SPARK_RETURN_IF_ERROR(AllReduce(y));
    HyperPost(x.data(), n, config_, mix, y.data());
  }
  // Rows that need logits: every token, or each sequence's last.
  std::vector<int64_t> rows;
  int64_t end = 0;
  for (const BatchSequence& s : batch.sequences) {
    end += s.query_len;
    if (batch.all_logits) {
      for (int64_t t = end - s.query_len; t < end; ++t) rows.push_back(t);
    } else {
      rows.push_back(end - 1);
    }
  }
  std::vector<float> head_in(rows.size() * hidden);
  for (size_t r = 0; r < rows.size(); ++r) {
    HyperHead(&x[rows[r] * streams * hidden], config_, w_, &head_in[r * hidden]);
  }
  RmsNormRows(head_in.data(), static_cast<int64_t>(rows.size()), hidden, w_.final_norm.data(),
              config_.rms_norm_eps);
  return Logits(head_in, static_cast<int64_t>(rows.size()), logits);
}

Status DeepseekV4Model::AllReduce(std::vector<float>& data) {
  if (comm_ == nullptr || comm_->world_size() == 1) return Status::Ok();
  return comm_->AllReduceSum(data.data(), data.size());
}

// This rank's vocabulary rows of the head, then an all-gather into full rows.
Status DeepseekV4Model::Logits(const std::vector<float>& head_in, int64_t rows,
                               std::vector<float>* logits) {
  const int hidden = config_.hidden_size;
  const int64_t vocab = config_.vocab_size, local = w_.ranges.vocab.size;
  const int world = comm_ == nullptr ? 1 : comm_->world_size();
  const int64_t padded = (vocab + world - 1) / world;
  std::vector<float> part(rows * std::max<int64_t>(local, 1));
  if (local > 0) {
    backend_.Linear(head_in.data(), rows, hidden, w_.lm_head().data(), static_cast<int>(local),
                    part.data());
  }
  logits->assign(rows * vocab, 0.0f);
  if (world == 1) {
    std::copy_n(part.begin(), rows * vocab, logits->begin());
    return Status::Ok();
  }
  std::vector<float> mine(rows * padded, 0.0f), gathered(world * rows * padded);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(&part[r * local], local, &mine[r * padded]);
  SPARK_RETURN_IF_ERROR(comm_->AllGather(mine.data(), mine.size(), gathered.data()));
  for (int rank = 0; rank < world; ++rank) {
    const int64_t begin = rank * padded, count = std::min(padded, vocab - begin);
    for (int64_t r = 0; r < rows && count > 0; ++r) {
      std::copy_n(&gathered[(rank * rows + r) * padded], count, &(*logits)[r * vocab + begin]);
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::model::dsv4
