#include "engine/model/deepseek_v41/dspark.h"

#include <algorithm>
#include <cmath>

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
  // The head is split by vocabulary rows as the lm_head is; the embedding rows stay whole.
  const int64_t rank = config_.dsv41.dspark_markov_rank;
  const Range& v = target.ranges.vocab;
  dsv4::Mat head = dsv4::Mat::Floats(
      dsv4::Vec(host.markov_head.begin() + v.begin * rank,
                host.markov_head.begin() + (v.begin + v.size) * rank),
      v.size, static_cast<int>(rank));
  matrix(head, &markov_head_);
  const int n = config_.residual_streams;
  vec(dsv4::Vec(n, 1.0f / static_cast<float>(n)), &mean_pre_);
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
  // Grown to the largest step so far, each old buffer freed before its successor comes.
  for (backend::Buffer& b : captures_) {
    if (static_cast<int64_t>(b.size()) >= floats) continue;
    b = backend::Buffer();
    SPARK_ASSIGN_OR_RETURN(b, backend_.Allocate(floats));
  }
  for (backend::Buffer* b : {&main_x_, &scratch_}) {
    if (static_cast<int64_t>(b->size()) >= floats) continue;
    *b = backend::Buffer();
    SPARK_ASSIGN_OR_RETURN(*b, backend_.Allocate(floats));
  }
  // The mean over the streams is a collapse whose pre is 1/n for every token: the one row
  // embedded for each token, once a step (nothing is uploaded).
  const int n = config_.residual_streams;
  if (static_cast<int64_t>(mean_pres_.size()) < tokens * n) {
    mean_pres_ = backend::Buffer();
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

Status DSpark::CheckBlock(const DraftBlock& b, int block_size) const {
  if (b.count < 1 || b.count > 16) {
    return InvalidArgumentError("DSpark drafts 1..16 tokens a step, not " +
                                std::to_string(b.count));
  }
  if (b.anchor < 0 || b.anchor >= config_.vocab_size) {
    return InvalidArgumentError("DSpark anchor token " + std::to_string(b.anchor) +
                                " is outside the vocabulary");
  }
  const int64_t end = int64_t{b.position} + b.count;
  if (b.position < 1 || static_cast<int64_t>(b.block_table.size()) * block_size < end) {
    return InvalidArgumentError("DSpark block at " + std::to_string(b.position) +
                                ": the block table (" + std::to_string(b.block_table.size()) +
                                " blocks of " + std::to_string(block_size) +
                                ") does not cover position " + std::to_string(end - 1) +
                                ", or there is no context");
  }
  return Status::Ok();
}

Status DSpark::EnsureRows(int64_t tokens, int64_t blocks) {
  // Kept between drafts (a step's block count varies); the old one goes before the new one comes.
  if (draft_ws_.tokens < tokens) {
    draft_ws_ = Workspace();
    SPARK_ASSIGN_OR_RETURN(draft_ws_,
                           AllocateWorkspace(backend_, config_, stack_.ranges, tokens, 1, 0));
  }
  const int64_t rank = config_.dsv41.dspark_markov_rank, local = target_.ranges.vocab.size;
  if (static_cast<int64_t>(base_logits_.size()) < tokens * local) {
    base_logits_ = backend::Buffer();
    SPARK_ASSIGN_OR_RETURN(base_logits_, backend_.Allocate(tokens * local));
  }
  if (static_cast<int64_t>(markov_rows_.size()) < blocks * rank) {
    markov_rows_ = backend::Buffer();
    markov_bias_ = backend::Buffer();
    pairs_ = backend::Buffer();
    SPARK_ASSIGN_OR_RETURN(markov_rows_, backend_.Allocate(blocks * rank));
    SPARK_ASSIGN_OR_RETURN(markov_bias_, backend_.Allocate(blocks * local));
    SPARK_ASSIGN_OR_RETURN(pairs_, backend_.Allocate(blocks * 2));
  }
  return Status::Ok();
}

Status DSpark::Draft(std::span<const DraftBlock> blocks, PagedKvCache& cache,
                     std::vector<std::vector<int32_t>>* drafts) {
  SPARK_RETURN_IF_ERROR(status_);
  const int bs = cache.block_size();
  for (const DraftBlock& b : blocks) {
    SPARK_RETURN_IF_ERROR(CheckBlock(b, bs));
    // One attention window serves every row: sliding_window context keys plus the block's.
    if (b.count != blocks[0].count) {
      return InvalidArgumentError("DSpark drafts blocks of one size a forward, not " +
                                  std::to_string(blocks[0].count) + " and " +
                                  std::to_string(b.count));
    }
  }
  drafts->assign(blocks.size(), {});
  if (blocks.empty()) return Status::Ok();
  const int count = blocks[0].count;
  const auto num_blocks = static_cast<int64_t>(blocks.size());
  const int64_t t = num_blocks * count;
  SPARK_RETURN_IF_ERROR(EnsureRows(t, num_blocks));
  // Rows position-major (row i * blocks + k is block k's position i), so each Markov step reads
  // one contiguous run of base logits. Each block token is its own "sequence" whose last
  // position is its block's last: a causal window of sliding_window + count keys then covers
  // exactly the context keys before the block and every key of its block.
  std::vector<int32_t> ids(t), positions(t);
  std::vector<int64_t> slots(t);
  std::vector<backend::AttentionSequence> rows(t);
  for (int i = 0; i < count; ++i) {
    for (int64_t k = 0; k < num_blocks; ++k) {
      const DraftBlock& b = blocks[k];
      const int64_t row = i * num_blocks + k;
      const int32_t p = b.position + i;
      ids[row] = i == 0 ? b.anchor : config_.dsv41.dspark_noise_token_id;
      positions[row] = p;
      slots[row] = int64_t{b.block_table[p / bs]} * bs + p % bs;
      rows[row] = {row, 1, int64_t{b.position} + count, b.block_table};
    }
  }
  Workspace& ws = draft_ws_;
  const int64_t capacity = ws.tokens;
  ws.tokens = t;  // the ops below read the row count from here
  const Status ran = Forward(ids, positions, slots, rows, count, cache, ws);
  ws.tokens = capacity;
  SPARK_RETURN_IF_ERROR(ran);
  // This rank's vocabulary slice of the base logits, kept in backend memory.
  const dsv4::ShardRanges& r = target_.ranges;
  backend_.Linear(ws.block_in.data(), t, config_.hidden_size, target_.lm_head().weight(),
                  static_cast<int>(r.vocab.size), base_logits_.data());
  return MarkovDrafts(blocks, count, drafts);
}

Status DSpark::Forward(std::span<const int32_t> ids, std::span<const int32_t> positions,
                       std::span<const int64_t> slots,
                       std::span<const backend::AttentionSequence> rows, int block_window,
                       PagedKvCache& cache, Workspace& ws) {
  const int n = config_.residual_streams, hidden = config_.hidden_size;
  const int64_t t = ws.tokens;
  const dsv4::ShardRanges& r = target_.ranges;
  backend_.Embedding(target_.embed.data(), r.vocab.begin, r.vocab.size, hidden, ids,
                     ws.block_out.data());
  SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, t * hidden));
  ops_.HcExpand(ws.block_out.data(), t, n, hidden, ws.streams.data());
  backend_.Embedding(stream0_.data(), 0, 1, n, std::vector<int32_t>(t, 0), ws.pre_prev.data());
  for (size_t j = 0; j < stack_.layers.size(); ++j) {
    const dsv4::LayerBuffers& l = stack_.layers[j];
    MixSite(ops_, config_, l.hc_attn, &ws.pre, ws);
    CollapseNorm(backend_, ops_, config_, ws.pre_prev, l.attn_norm, ws);
    Attention(static_cast<int>(j), positions, slots, rows,
              config_.dsv4.sliding_window + block_window, cache, ws);
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, t * hidden));
    ops_.HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), t, n,
                hidden);
    MixSite(ops_, config_, l.hc_ffn, &ws.pre_prev, ws);
    CollapseNorm(backend_, ops_, config_, ws.pre, l.ffn_norm, ws);
    moe_->Forward(static_cast<int>(j), ids,
                  {ws.block_in.data(), ws.block_out.data(), ws.router.data(),
                   ws.expert_ids.data(), ws.expert_weights.data(), t});
    SPARK_RETURN_IF_ERROR(AllReduce(ws.block_out, t * hidden));
    ops_.HcPost(ws.streams.data(), ws.block_out.data(), ws.post.data(), ws.comb.data(), t, n,
                hidden);
  }
  ops_.HcCollapse(ws.streams.data(), ws.pre_prev.data(), t, n, hidden, ws.block_in.data());
  backend_.RmsNorm(ws.block_in.data(), norm_.data(), t, hidden, config_.rms_norm_eps,
                   ws.block_in.data());
  return Status::Ok();
}

// The Markov head, left to right, the blocks side by side: each draft biases its block's next
// position. Every rank adds its vocabulary slice of the bias to its slice of the base logits
// and takes the slice's argmax; the ranks' (value, id) pairs merge into the same drafts
// everywhere (ties to the lower id, as one rank's argmax breaks them).
Status DSpark::MarkovDrafts(std::span<const DraftBlock> blocks, int count,
                            std::vector<std::vector<int32_t>>* drafts) {
  const int vocab = config_.vocab_size, rank = config_.dsv41.dspark_markov_rank;
  const Range& v = target_.ranges.vocab;
  const auto m = static_cast<int64_t>(blocks.size());
  const int world = comm_ == nullptr ? 1 : comm_->world_size();
  std::vector<int32_t> prev(m);
  for (int64_t k = 0; k < m; ++k) prev[k] = blocks[k].anchor;
  std::vector<float> mine(m * 2), all(world > 1 ? world * m * 2 : 0);
  for (int i = 0; i < count; ++i) {
    backend_.Embedding(markov_embed_.data(), 0, vocab, rank, prev, markov_rows_.data());
    backend_.Linear(markov_rows_.data(), m, rank, markov_head_.weight(),
                    static_cast<int>(v.size), markov_bias_.data());
    backend_.Add(markov_bias_.data(), base_logits_.data() + i * m * v.size,
                 static_cast<size_t>(m * v.size));
    backend_.ArgMax(markov_bias_.data(), m, static_cast<int>(v.size), v.begin, pairs_.data());
    backend_.Download(pairs_.data(), mine);
    SPARK_RETURN_IF_ERROR(backend_.status());
    if (world > 1) SPARK_RETURN_IF_ERROR(comm_->AllGather(mine.data(), mine.size(), all.data()));
    Result<std::vector<int32_t>> ids = backend::MergeArgMax(world > 1 ? all : mine, world, m);
    if (!ids.ok()) return ids.status().WithContext("DSpark draft position " + std::to_string(i));
    for (int64_t k = 0; k < m; ++k) {
      (*drafts)[k].push_back((*ids)[k]);
      prev[k] = (*ids)[k];
    }
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
