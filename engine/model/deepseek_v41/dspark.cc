#include "engine/model/deepseek_v41/dspark.h"

#include <algorithm>
#include <cmath>

#include "engine/model/deepseek_v4/logits.h"
#include "engine/model/deepseek_v41/hc_site.h"

namespace spark::engine::model::dsv41 {

using backend::FakeQuantFormat;

DSpark::DSpark(const core::ModelConfig& config, DraftWeights host, const CacheLayout& layout,
               const dsv4::BackendWeights& target, const backend::Buffer& stream0,
               backend::Backend& backend, backend::DeepseekOps& ops, comm::Communicator* comm)
    : config_(DraftConfig(config)),
      layout_(layout),
      target_(target),
      stream0_(stream0),
      backend_(backend),
      ops_(ops),
      comm_(comm) {
  const dsv4::WeightTypes types = host.stack.types;
  Result<dsv4::BackendWeights> stack = dsv4::UploadWeights(std::move(host.stack), config_, backend);
  if (!stack.ok()) {
    status_ = stack.status();
    return;
  }
  stack_ = std::move(*stack);
  auto matrix = [&](dsv4::Mat& m, backend::Buffer* out) {
    if (!status_.ok()) return;
    Result<backend::Buffer> b = dsv4::UploadMatrix(backend_, types, m);
    if (b.ok()) {
      *out = std::move(*b);
    } else {
      status_ = b.status();
    }
  };
  auto vec = [&](const dsv4::Vec& v, backend::Buffer* out) {
    if (!status_.ok()) return;
    Result<backend::Buffer> b = backend_.Allocate(v.size());
    if (!b.ok()) {
      status_ = b.status();
      return;
    }
    backend_.Upload(v, b->data());
    *out = std::move(*b);
  };
  main_proj_.resize(host.main_proj.size());
  for (size_t k = 0; k < host.main_proj.size(); ++k) matrix(host.main_proj[k], &main_proj_[k]);
  vec(host.main_norm, &main_norm_);
  vec(host.norm, &norm_);
  vec(host.markov_embed, &markov_embed_);
  const int rank = config_.dsv41.dspark_markov_rank;
  dsv4::Mat head = dsv4::Mat::Floats(std::move(host.markov_head), config_.vocab_size, rank);
  matrix(head, &markov_head_);
  const int n = config_.residual_streams;
  vec(dsv4::Vec(n, 1.0f / static_cast<float>(n)), &mean_pre_);
  vec(dsv4::Vec(rank, 0.0f), &markov_row_);
  vec(dsv4::Vec(config_.vocab_size, 0.0f), &markov_bias_);
  if (!status_.ok()) return;
  moe_ = std::make_unique<dsv4::Moe>(config_, stack_, backend_, ops_);
  const dsv4::ShardRanges& r = stack_.ranges;
  for (int64_t g = 0; g < r.groups.size; ++g) {
    group_in_.push_back(static_cast<int>(r.GroupHeads(g).size) * config_.head_dim);
  }
}

Status DSpark::AllReduce(backend::Buffer& data, int64_t count) {
  if (comm_ == nullptr || comm_->world_size() == 1) return Status::Ok();
  return comm_->AllReduceSum(data.data(), static_cast<size_t>(count));
}

int DSpark::CaptureIndex(int layer) const {
  const std::vector<int>& ids = config_.dsv41.dspark_target_layer_ids;
  const auto it = std::find(ids.begin(), ids.end(), layer);
  return it == ids.end() ? -1 : static_cast<int>(it - ids.begin());
}

Status DSpark::BeginStep(int64_t tokens) {
  step_tokens_ = tokens;
  const int64_t floats = tokens * config_.hidden_size;
  captures_.resize(main_proj_.size());
  for (backend::Buffer& b : captures_) {
    if (static_cast<int64_t>(b.size()) >= floats) continue;
    SPARK_ASSIGN_OR_RETURN(b, backend_.Allocate(floats));
  }
  for (backend::Buffer* b : {&main_x_, &scratch_}) {
    if (static_cast<int64_t>(b->size()) >= floats) continue;
    SPARK_ASSIGN_OR_RETURN(*b, backend_.Allocate(floats));
  }
  // The mean over the streams is a collapse whose pre is 1/n for every token: the one row
  // embedded for each token, once a step (nothing is uploaded).
  const int n = config_.residual_streams;
  if (static_cast<int64_t>(mean_pres_.size()) < tokens * n) {
    SPARK_ASSIGN_OR_RETURN(mean_pres_, backend_.Allocate(tokens * n));
  }
  backend_.Embedding(mean_pre_.data(), 0, 1, n, std::vector<int32_t>(tokens, 0),
                     mean_pres_.data());
  return Status::Ok();
}

void DSpark::Capture(int k, const Workspace& ws) {
  ops_.HcCollapse(ws.streams.data(), mean_pres_.data(), step_tokens_, config_.residual_streams,
                  config_.hidden_size, captures_[k].data());
}

void DSpark::WindowKeys(const dsv4::LayerBuffers& l, const float* in, int64_t tokens,
                        std::span<const int32_t> positions, float* keys) const {
  const int hd = config_.head_dim;
  backend_.Linear(in, tokens, config_.hidden_size, l.wkv.weight(), hd, keys);
  backend_.RmsNorm(keys, l.kv_norm.data(), tokens, hd, config_.rms_norm_eps, keys);
  ops_.Rope(keys, positions, 1, hd, target_.main_rope(), /*inverse=*/false);
  ops_.FakeQuant({keys, tokens, hd, 32, FakeQuantFormat::kFp8Ue8m0});
}

void DSpark::StoreContext(const ForwardBatch& batch, PagedKvCache& cache) {
  const int64_t t = step_tokens_;
  const int hidden = config_.hidden_size;
  for (size_t k = 0; k < main_proj_.size(); ++k) {
    float* out = k == 0 ? main_x_.data() : scratch_.data();
    backend_.Linear(captures_[k].data(), t, hidden, main_proj_[k].weight(), hidden, out);
    if (k > 0) backend_.Add(main_x_.data(), scratch_.data(), static_cast<size_t>(t * hidden));
  }
  backend_.RmsNorm(main_x_.data(), main_norm_.data(), t, hidden, config_.rms_norm_eps,
                   main_x_.data());
  for (size_t j = 0; j < stack_.layers.size(); ++j) {
    const dsv4::LayerBuffers& l = stack_.layers[j];
    const int layer = config_.num_layers + static_cast<int>(j);
    WindowKeys(l, main_x_.data(), t, batch.positions, scratch_.data());
    ops_.WriteField(scratch_.data(), batch.slots,
                    layout_.Ref(cache, layer, layout_.layer(layer).window));
  }
}

Status DSpark::Draft(int32_t anchor, int32_t position, std::span<const int32_t> block_table,
                     int count, PagedKvCache& cache, std::vector<int32_t>* drafts) {
  SPARK_RETURN_IF_ERROR(status_);
  const int vocab = config_.vocab_size, bs = cache.block_size();
  if (count < 1 || count > 16) {
    return InvalidArgumentError("DSpark drafts 1..16 tokens a step, not " + std::to_string(count));
  }
  if (anchor < 0 || anchor >= vocab) {
    return InvalidArgumentError("DSpark anchor token " + std::to_string(anchor) +
                                " is outside the vocabulary");
  }
  const int64_t end = int64_t{position} + count;
  if (position < 1 || static_cast<int64_t>(block_table.size()) * bs < end) {
    return InvalidArgumentError("DSpark block at " + std::to_string(position) + ": the block table (" +
                                std::to_string(block_table.size()) + " blocks of " +
                                std::to_string(bs) + ") does not cover position " +
                                std::to_string(end - 1) + ", or there is no context");
  }
  const int n = config_.residual_streams, hidden = config_.hidden_size;
  std::vector<int32_t> ids(count, config_.dsv41.dspark_noise_token_id), positions(count);
  std::vector<int64_t> slots(count);
  ids[0] = anchor;
  for (int i = 0; i < count; ++i) {
    positions[i] = position + i;
    slots[i] = int64_t{block_table[positions[i] / bs]} * bs + positions[i] % bs;
  }
  // Each block token is its own "sequence" whose last position is the block's last: a causal
  // window of sliding_window + count keys then covers exactly the context keys before the
  // block and every block key.
  std::vector<backend::AttentionSequence> rows(count);
  for (int i = 0; i < count; ++i) rows[i] = {i, 1, end, block_table};
  if (draft_ws_.tokens != count) {  // a block's size rarely changes: kept between drafts
    SPARK_ASSIGN_OR_RETURN(draft_ws_,
                           AllocateWorkspace(backend_, config_, stack_.ranges, count, 1, 0));
  }
  Workspace& ws = draft_ws_;
  const dsv4::ShardRanges& r = target_.ranges;
  backend_.Embedding(target_.embed.data(), r.vocab.begin, r.vocab.size, hidden, ids,
                     ws.block_out.data());
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, int64_t{count} * hidden));
  ops_.HcExpand(ws.block_out.data(), count, n, hidden, ws.streams.data());
  backend_.Embedding(stream0_.data(), 0, 1, n, std::vector<int32_t>(count, 0), ws.pre_prev.data());
  for (size_t j = 0; j < stack_.layers.size(); ++j) {
    const dsv4::LayerBuffers& l = stack_.layers[j];
    MixSite(ops_, config_, l.hc_attn, &ws.pre, ws);
    CollapseNorm(backend_, ops_, config_, ws.pre_prev, l.attn_norm, ws);
    Attention(static_cast<int>(j), positions, slots, rows,
              config_.dsv4.sliding_window + count, cache, ws);
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, int64_t{count} * hidden));
    ops_.HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), count, n,
                hidden);
    MixSite(ops_, config_, l.hc_ffn, &ws.pre_prev, ws);
    CollapseNorm(backend_, ops_, config_, ws.pre, l.ffn_norm, ws);
    moe_->Forward(static_cast<int>(j), ids,
                  {ws.block_in.data(), ws.block_out.data(), ws.router.data(),
                   ws.expert_ids.data(), ws.expert_weights.data(), count});
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, int64_t{count} * hidden));
    ops_.HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), count, n,
                hidden);
  }
  ops_.HcCollapse(ws.streams.data(), ws.pre_prev.data(), count, n, hidden, ws.block_in.data());
  backend_.RmsNorm(ws.block_in.data(), norm_.data(), count, hidden, config_.rms_norm_eps,
                   ws.block_in.data());
  std::vector<float> logits;
  SPARK_RETURN_IF_ERROR(
      dsv4::VocabParallelLogits(backend_, comm_, target_, config_, ws.block_in, count, &logits));
  // The Markov head, left to right: each draft biases the next position's logits.
  const int rank = config_.dsv41.dspark_markov_rank;
  std::vector<float> bias(vocab);
  drafts->clear();
  int32_t prev = anchor;
  for (int i = 0; i < count; ++i) {
    backend_.Embedding(markov_embed_.data(), 0, vocab, rank, std::span<const int32_t>(&prev, 1),
                       markov_row_.data());
    backend_.Linear(markov_row_.data(), 1, rank, markov_head_.weight(), vocab,
                    markov_bias_.data());
    backend_.Download(markov_bias_.data(), bias);
    SPARK_RETURN_IF_ERROR(backend_.status());
    const float* u = logits.data() + static_cast<size_t>(i) * vocab;
    int best = 0;
    float best_value = u[0] + bias[0];
    for (int v = 1; v < vocab; ++v) {
      const float value = u[v] + bias[v];
      if (value > best_value) {
        best = v;
        best_value = value;
      }
    }
    drafts->push_back(best);
    prev = best;
  }
  return Status::Ok();
}

void DSpark::Attention(int layer, std::span<const int32_t> positions,
                       std::span<const int64_t> slots,
                       std::span<const backend::AttentionSequence> sequences, int window,
                       PagedKvCache& cache, Workspace& ws) const {
  const dsv4::LayerBuffers& l = stack_.layers[layer];
  const int64_t t = ws.tokens;
  const int hidden = config_.hidden_size, hd = config_.head_dim;
  const int heads = static_cast<int>(stack_.ranges.heads.size);
  const int ql = config_.dsv4.q_lora_rank;
  const backend::RopeTable rope = target_.main_rope();
  backend_.Linear(ws.block_in.data(), t, hidden, l.wq_a.weight(), ql, ws.qr.data());
  backend_.RmsNorm(ws.qr.data(), l.q_norm.data(), t, ql, config_.rms_norm_eps, ws.qr.data());
  backend_.Linear(ws.qr.data(), t, ql, l.wq_b.weight(), heads * hd, ws.q.data());
  ops_.Rope(ws.q.data(), positions, heads, hd, rope, /*inverse=*/false);
  WindowKeys(l, ws.block_in.data(), t, positions, ws.kv.data());
  const int cache_layer = config_.num_layers + layer;
  const backend::CacheField keys =
      layout_.Ref(cache, cache_layer, layout_.layer(cache_layer).window);
  ops_.WriteField(ws.kv.data(), slots, keys);
  ops_.SparseAttention({.q = ws.q.data(),
                        .heads = heads,
                        .head_dim = hd,
                        .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                        .sequences = sequences,
                        .block_size = cache.block_size(),
                        .window = window,
                        .window_keys = keys,
                        .sinks = l.sinks.data(),
                        .out = ws.o.data()});
  ops_.Rope(ws.o.data(), positions, heads, hd, rope, /*inverse=*/true);
  const int ol = config_.dsv4.o_lora_rank;
  ops_.GroupedLinear(ws.o.data(), t, group_in_, l.wo_a.weight(), ol, ws.grouped.data());
  backend_.Linear(ws.grouped.data(), t, static_cast<int>(group_in_.size()) * ol, l.wo_b.weight(),
                  hidden, ws.block_out.data());
}

}  // namespace spark::engine::model::dsv41
