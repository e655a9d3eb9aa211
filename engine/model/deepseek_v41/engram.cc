#include "engine/model/deepseek_v41/engram.h"

#include <algorithm>
#include <utility>

namespace spark::engine::model::dsv41 {

Engram::Engram(const core::ModelConfig& config, const BackendWeights& weights,
               const EngramHashing& hashing, std::vector<int32_t> token_map,
               const CacheLayout& layout, backend::Backend& backend, backend::DeepseekOps& ops)
    : c_(config),
      w_(weights),
      hashing_(hashing),
      token_map_(std::move(token_map)),
      layout_(layout),
      backend_(backend),
      ops_(ops) {
  // One row per id the model takes (vocab_size: the step check refuses larger ids).
  std::vector<float> rows(c_.vocab_size, 0.0f);
  std::copy_n(token_map_.begin(), std::min(token_map_.size(), rows.size()), rows.begin());
  Result<backend::Buffer> map = backend_.Allocate(rows.size());
  if (!map.ok()) {
    ready_ = map.status();
    return;
  }
  map_ = std::move(*map);
  backend_.Upload(rows, map_.data());
}

Status Engram::Prepare(const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws) const {
  SPARK_RETURN_IF_ERROR(ready_);
  const int64_t n = batch.num_tokens();
  const int back = hashing_.max_ngram();
  std::vector<float> ids(n);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = batch.token_ids[t];
    if (id < 0 || id >= static_cast<int32_t>(token_map_.size())) {
      return InvalidArgumentError("token id " + std::to_string(id) + " is outside the Engram " +
                                  "token map (" + std::to_string(token_map_.size()) + " ids)");
    }
    ids[t] = static_cast<float>(token_map_[id]);
  }
  const backend::CacheField field = layout_.Ref(cache, 0, layout_.layer(0).token);
  backend_.Embedding(map_.data(), 0, c_.vocab_size, 1, batch.token_ids, ws.token_ids.data());
  ops_.WriteField(ws.token_ids.data(), batch.slots, field);
  if (mirror_of_ != field.base) {
    mirror_of_ = field.base;
    mirror_.assign(static_cast<size_t>(cache.num_blocks()) * cache.block_size(), 0);
  }
  for (int64_t t = 0; t < n; ++t) mirror_[batch.slots[t]] = static_cast<int32_t>(ids[t]) + 1;
  std::vector<int64_t> lookback(n * back, -1);
  int64_t t = 0;
  for (const BatchSequence& s : batch.sequences) {
    const int64_t first = s.context_len - s.query_len;  // position of the sequence's first query
    for (int64_t i = 0; i < s.query_len; ++i, ++t) {
      const int64_t p = first + i;
      for (int k = 0; k < back && p - k >= 0; ++k) {
        const int64_t q = p - k;
        if (q >= first) {
          lookback[t * back + k] = static_cast<int64_t>(ids[t - k]);
          continue;
        }
        const int64_t slot = int64_t{s.block_table[q / cache.block_size()]} * cache.block_size() +
                             q % cache.block_size();
        lookback[t * back + k] = CachedId(field, slot);
      }
    }
  }
  const int cols = hashing_.columns();
  rows_.resize(w_.tables.size());
  for (size_t e = 0; e < w_.tables.size(); ++e) {
    rows_[e].resize(n * cols);
    for (int64_t t = 0; t < n; ++t) {
      hashing_.Hash(static_cast<int>(e), std::span(lookback).subspan(t * back, back),
                    rows_[e].data() + t * cols);
    }
    w_.tables[e].Prefetch(rows_[e]);
  }
  return Status::Ok();
}

int64_t Engram::CachedId(const backend::CacheField& field, int64_t slot) const {
  if (mirror_[slot] > 0) return mirror_[slot] - 1;
  float cached = 0;
  backend_.Download(field.base + slot * field.stride + field.offset, std::span(&cached, 1));
  mirror_[slot] = static_cast<int32_t>(cached) + 1;
  return static_cast<int64_t>(cached);
}

void Engram::Apply(int e, Workspace& ws) const {
  const int64_t n = ws.tokens;
  const int cols = hashing_.columns(), dim = w_.tables[e].dim();
  const int hidden = c_.hidden_size, streams = c_.residual_streams;
  const std::vector<int64_t>& rows = rows_[e];
  std::vector<float> gathered(rows.size() * dim);
  w_.tables[e].Gather(rows, gathered.data());
  backend_.Upload(gathered, ws.engram_rows.data());
  backend_.Linear(ws.engram_rows.data(), n, cols * dim, w_.engram_wkv[e].weight(),
                  (streams + 1) * hidden, ws.engram_kv.data());
  ops_.EngramGate({.streams = ws.streams.data(),
                   .kv = ws.engram_kv.data(),
                   .weight = w_.engram_weight[e].data(),
                   .tokens = n,
                   .n = streams,
                   .hidden = hidden,
                   .eps = c_.rms_norm_eps});
}

}  // namespace spark::engine::model::dsv41
