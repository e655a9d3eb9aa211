#include "engine/model/qwen3/qwen3_model.h"

#include "engine/model/qwen3/step_widths.h"

#include <algorithm>
#include <cmath>

namespace spark::engine::model::qwen3 {

// Activations of one forward step, sized for its token count. x (every norm's output) and act
// (the MLP's activation) carry bf16 copies where the backend's Linears read those
// (Backend::Bf16InputsPay); the ops that write them write both.
struct Qwen3Model::Workspace {
  int64_t n = 0;
  backend::Buffer h, x, qkv, q, k, v, attn, tmp, gate_up, act, router;
  backend::Buffer x16, act16;  // bf16 copies (empty: none)
  bool final_normed = false;   // the last layer wrote the final norm of every row into x

  // The norm output rows [row, n), with their bf16 copy.
  backend::Output X(int64_t row = 0, int64_t width = 0) {
    if (x16.empty()) return x.data() + row * width;
    return {x.data() + row * width, static_cast<char*>(x16.raw()) + row * width * 2};
  }
  backend::Output Act() { return {act.data(), act16.empty() ? nullptr : act16.raw()}; }
};

Qwen3Model::Qwen3Model(core::ModelConfig config, Qwen3Weights weights, backend::Backend& backend,
                       comm::Communicator* comm, const ModelOptions& options)
    : config_(std::move(config)),
      w_(std::move(weights)),
      dense_(std::none_of(w_.layers.begin(), w_.layers.end(),
                          [](const Qwen3LayerWeights& l) { return l.mlp == core::MlpType::kMoe; })),
      backend_(backend),
      comm_(comm),
      options_(options),
      feed_(backend.Allocate(static_cast<size_t>(options.shard.size) * kMaxLaunchRows * 2)) {}

KvCacheSpec Qwen3Model::kv_cache_spec() const {
  return {config_.num_layers, static_cast<int>(w_.kv_heads.size) * config_.head_dim,
          options_.kv_dtype};
}

bool Qwen3Model::FusesResidual() const {
  return options_.fuse_residual && options_.shard.size == 1 && dense_;
}

std::string Qwen3Model::WhyNoDecodeGraphs() const {
  if (options_.shard.size != 1 && (comm_ == nullptr || !comm_->collectives_in_graphs())) {
    return "tensor parallelism over collectives that cannot be captured (NCCL; the peer "
           "all-reduce of GPUs on one host can)";
  }
  if (!dense_) return "MoE layers read their expert counts back to the host";
  return "";
}

Status Qwen3Model::AllReduce(float* data, size_t count) {
  if (options_.shard.size == 1) return Status::Ok();
  return comm_->AllReduceSum(data, count);
}

comm::Communicator* Qwen3Model::Collectives() const {
  return options_.shard.size == 1 ? nullptr : comm_;
}

Status Qwen3Model::Forward(const ForwardBatch& batch, PagedKvCache& cache,
                           std::vector<float>* logits) {
  Workspace ws;
  SPARK_RETURN_IF_ERROR(Hidden(batch, cache, ws));
  return Logits(batch, ws, logits);
}

Status Qwen3Model::ForwardArgMax(const ForwardBatch& batch, PagedKvCache& cache,
                                 std::vector<int32_t>* ids) {
  Workspace ws;
  SPARK_RETURN_IF_ERROR(Hidden(batch, cache, ws));
  const int world = options_.shard.size;
  const int64_t rows = FinalNorm(batch, ws);
  SPARK_ASSIGN_OR_RETURN(backend::Buffer pairs, backend_.Allocate(world * rows * 2));
  SPARK_RETURN_IF_ERROR(ArgMaxPairs(rows, ws, pairs.data()));
  std::vector<float> host(world * rows * 2);
  backend_.Download(pairs.data(), host);
  SPARK_ASSIGN_OR_RETURN(*ids, backend::MergeArgMax(host, world, rows));
  return Status::Ok();
}

Status Qwen3Model::LaunchArgMax(const ForwardBatch& batch, PagedKvCache& cache,
                                bool ids_from_last) {
  SPARK_RETURN_IF_ERROR(CheckLaunch(batch, ids_from_last));
  const int world = options_.shard.size;
  const int64_t rows = batch.num_logit_rows();
  if (!feed_.ok()) return feed_.status();
  if (rows > kMaxLaunchRows) {
    return InvalidArgumentError("LaunchArgMax: at most " + std::to_string(kMaxLaunchRows) +
                                " rows a step (got " + std::to_string(rows) + ")");
  }
  Workspace ws;
  SPARK_RETURN_IF_ERROR(Hidden(batch, cache, ws, ids_from_last ? feed_->data() : nullptr));
  // The next step's embedding reads these pairs where they are (ids_from_last), after the
  // download of this step has copied them out: both follow this step on the backend's stream.
  SPARK_RETURN_IF_ERROR(ArgMaxPairs(FinalNorm(batch, ws), ws, feed_->data()));
  SPARK_RETURN_IF_ERROR(backend_.DownloadLater(feed_->data(), world * rows * 2));
  last_launched_rows_ = rows;
  launched_rows_.push_back(rows);
  return Status::Ok();
}

Status Qwen3Model::TakeArgMax(std::vector<int32_t>* ids) {
  if (launched_rows_.empty()) return FailedPreconditionError("TakeArgMax: no step launched");
  const int world = options_.shard.size;
  const int64_t rows = launched_rows_.front();
  launched_rows_.pop_front();
  std::vector<float> host(world * rows * 2);
  SPARK_RETURN_IF_ERROR(backend_.TakeDownload(host));
  SPARK_ASSIGN_OR_RETURN(*ids, backend::MergeArgMax(host, world, rows));
  return Status::Ok();
}

Status Qwen3Model::ArgMaxPairs(int64_t rows, Workspace& ws, float* out) {
  const int world = options_.shard.size;
  SPARK_ASSIGN_OR_RETURN(backend::Buffer local, backend_.Allocate(rows * w_.vocab.size));
  if (w_.vocab.size > 0) {
    backend_.Linear(ws.X(), rows, config_.hidden_size, w_.lm_head_weight(),
                    static_cast<int>(w_.vocab.size), local.data());
  }
  if (world == 1) {
    backend_.ArgMax(local.data(), rows, static_cast<int>(w_.vocab.size), w_.vocab.begin, out);
    return Status::Ok();
  }
  SPARK_ASSIGN_OR_RETURN(backend::Buffer pairs, backend_.Allocate(rows * 2));
  backend_.ArgMax(local.data(), rows, static_cast<int>(w_.vocab.size), w_.vocab.begin,
                  pairs.data());
  return comm_->AllGather(pairs.data(), rows * 2, out);
}

Status Qwen3Model::Hidden(const ForwardBatch& batch, PagedKvCache& cache, Workspace& ws,
                          const float* fed_pairs) {
  SPARK_RETURN_IF_ERROR(batch.Validate(cache.block_size(), cache.num_blocks(), config_.vocab_size));
  if (cache.spec().kv_width != kv_cache_spec().kv_width ||
      cache.spec().num_layers != config_.num_layers) {
    return InvalidArgumentError("kv cache was made for another model or rank (KV width " +
                                std::to_string(cache.spec().kv_width) + ", expected " +
                                std::to_string(kv_cache_spec().kv_width) + ")");
  }
  const int64_t n = batch.num_tokens();
  const int64_t hidden = config_.hidden_size;
  const StepWidths sw = MakeStepWidths(config_, w_.heads.size, w_.kv_heads.size,
                                       std::max(w_.dense_inter, w_.expert_inter));
  ws.n = n;
  for (auto [buffer, width] : {std::pair{&ws.h, sw.h},
                               {&ws.x, sw.x},
                               {&ws.tmp, sw.tmp},
                               {&ws.qkv, sw.qkv},
                               {&ws.q, sw.q},
                               {&ws.attn, sw.attn},
                               {&ws.k, sw.k},
                               {&ws.v, sw.v},
                               {&ws.gate_up, sw.gate_up},
                               {&ws.act, sw.act},
                               {&ws.router, sw.router}}) {
    SPARK_ASSIGN_OR_RETURN(*buffer, backend_.Allocate(static_cast<size_t>(n * width)));
  }
  if (backend_.Bf16InputsPay(n, options_.weight_dtype)) {
    // Two bf16 values per float of storage.
    SPARK_ASSIGN_OR_RETURN(ws.x16, backend_.Allocate(static_cast<size_t>(n * hidden + 1) / 2));
    SPARK_ASSIGN_OR_RETURN(ws.act16, backend_.Allocate(static_cast<size_t>(n * sw.inter + 1) / 2));
  }
  if (fed_pairs != nullptr) {
    backend_.EmbeddingOfArgMax(w_.embed.data(), w_.vocab.begin, w_.vocab.size, config_.hidden_size,
                               fed_pairs, options_.shard.size, n, ws.h.data());
  } else {
    backend_.Embedding(w_.embed.data(), w_.vocab.begin, w_.vocab.size, config_.hidden_size,
                       batch.token_ids, ws.h.data());
  }
  SPARK_RETURN_IF_ERROR(AllReduce(ws.h.data(), n * hidden));
  // Each layer's input norm comes from the layer before (its last op adds into h and norms);
  // the first layer's here. Decode steps norm every row for the logits, so the last layer does
  // the final norm too.
  backend_.RmsNorm(ws.h.data(), w_.layers[0].input_norm.data(), n, config_.hidden_size,
                   config_.rms_norm_eps, ws.X());
  const bool every_row = batch.all_logits || batch.num_logit_rows() == n;
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    SPARK_RETURN_IF_ERROR(Attention(layer, batch, cache, ws));
    const bool last = layer + 1 == config_.num_layers;
    const float* next_norm = !last     ? w_.layers[layer + 1].input_norm.data()
                             : every_row ? w_.final_norm.data()
                                         : nullptr;
    SPARK_RETURN_IF_ERROR(Mlp(layer, n, next_norm, ws));
  }
  ws.final_normed = every_row;
  return Status::Ok();
}

backend::AttentionShape Qwen3Model::AttentionShapeOf(const PagedKvCache& cache) const {
  const int hd = config_.head_dim;
  return {static_cast<int>(w_.heads.size), static_cast<int>(w_.kv_heads.size), hd,
          cache.block_size(), 1.0f / std::sqrt(static_cast<float>(hd))};
}

Status Qwen3Model::Attention(int layer, const ForwardBatch& batch, PagedKvCache& cache,
                             Workspace& ws) {
  const Qwen3LayerWeights& l = w_.layers[layer];
  const int64_t n = ws.n;
  const int hidden = config_.hidden_size, hd = config_.head_dim;
  const int heads = static_cast<int>(w_.heads.size), kv_heads = static_cast<int>(w_.kv_heads.size);
  backend::QkvToCache to_cache{.q = ws.q.data(),
                               .k = ws.k.data(),
                               .v = ws.v.data(),
                               .heads = heads,
                               .kv_heads = kv_heads,
                               .head_dim = hd,
                               .q_norm = l.q_norm.data(),
                               .k_norm = l.k_norm.data(),
                               .eps = config_.rms_norm_eps,
                               .theta = config_.rope_theta,
                               .cache = cache.layer(layer)};
  if (!l.qkv.empty()) {
    // q, k and v stacked in one matrix: one Linear, and the q/k norm reads the stacked rows.
    const int total = (heads + 2 * kv_heads) * hd;
    backend_.Linear(ws.X(), n, hidden, l.qkv.weight(), total, ws.qkv.data());
    to_cache.qkv = ws.qkv.data();
    to_cache.qkv_stride = total;
  } else {
    const backend::LinearOut outs[] = {{l.q.weight(), heads * hd, ws.q.data()},
                                       {l.k.weight(), kv_heads * hd, ws.k.data()},
                                       {l.v.weight(), kv_heads * hd, ws.v.data()}};
    backend_.LinearMany(ws.X(), n, hidden, outs);
  }
  backend_.QkNormRopeWriteKv(to_cache, batch.positions, batch.slots);
  std::vector<backend::AttentionSequence> seqs;
  int64_t start = 0;
  for (const BatchSequence& s : batch.sequences) {
    seqs.push_back({start, s.query_len, s.context_len, s.block_table});
    start += s.query_len;
  }
  backend_.PagedAttention(ws.q.data(), seqs, cache.layer(layer), AttentionShapeOf(cache),
                          ws.attn.data());
  // The output projection into the residual stream, then the MLP's input norm.
  const float* norm = l.post_attention_norm.data();
  if (FusesResidual()) {
    backend_.LinearAddRmsNorm(ws.attn.data(), n, heads * hd, l.o.weight(), hidden, ws.tmp.data(),
                              ws.h.data(), norm, config_.rms_norm_eps, ws.X());
    return Status::Ok();
  }
  backend_.Linear(ws.attn.data(), n, heads * hd, l.o.weight(), hidden, ws.tmp.data());
  return backend_.AllReduceAddRmsNorm(Collectives(), ws.h.data(), ws.tmp.data(), norm, n, hidden,
                                      config_.rms_norm_eps, ws.X());
}

Status Qwen3Model::Mlp(int layer, int64_t n, const float* next_norm, Workspace& ws) {
  const Qwen3LayerWeights& l = w_.layers[layer];
  const int hidden = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  if (FusesResidual()) {  // dense, one rank: the down projection adds into h
    const int inter = w_.dense_inter;
    backend_.LinearSiluMul(ws.X(), n, hidden, l.gate_up.weight(), inter, ws.gate_up.data(),
                           ws.Act());
    if (next_norm == nullptr) {
      backend_.LinearAdd(ws.Act(), n, inter, l.down.weight(), hidden, ws.tmp.data(), ws.h.data());
    } else {
      backend_.LinearAddRmsNorm(ws.Act(), n, inter, l.down.weight(), hidden, ws.tmp.data(),
                                ws.h.data(), next_norm, eps, ws.X());
    }
    return Status::Ok();
  }
  if (l.mlp == core::MlpType::kMoe) {
    const int experts = config_.moe.num_experts;
    backend_.Linear(ws.X(), n, hidden, l.router.data(), experts, ws.router.data());
    backend::MoeExperts moe{experts,
                            config_.moe.top_k,
                            config_.moe.norm_topk_prob,
                            w_.expert_inter,
                            w_.expert_begin,
                            {},
                            {}};
    for (size_t e = 0; e < l.expert_gate_up.size(); ++e) {
      moe.gate_up.push_back(l.expert_gate_up[e].weight());
      moe.down.push_back(l.expert_down[e].weight());
    }
    backend_.Moe(ws.x.data(), n, hidden, ws.router.data(), moe, ws.tmp.data());
  } else {
    const int inter = w_.dense_inter;
    backend_.LinearSiluMul(ws.X(), n, hidden, l.gate_up.weight(), inter, ws.gate_up.data(),
                           ws.Act());
    backend_.Linear(ws.Act(), n, inter, l.down.weight(), hidden, ws.tmp.data());
  }
  // The row-parallel sum, the residual add and the next norm (the next layer's input norm, or
  // the final one).
  if (next_norm != nullptr) {
    return backend_.AllReduceAddRmsNorm(Collectives(), ws.h.data(), ws.tmp.data(), next_norm, n,
                                        hidden, eps, ws.X());
  }
  SPARK_RETURN_IF_ERROR(AllReduce(ws.tmp.data(), n * hidden));
  backend_.Add(ws.h.data(), ws.tmp.data(), n * hidden);
  return Status::Ok();
}

int64_t Qwen3Model::FinalNorm(const ForwardBatch& batch, Workspace& ws) {
  const int hidden = config_.hidden_size;
  const int64_t rows = batch.num_logit_rows();
  if (ws.final_normed) return rows;  // every row, by the last layer (Hidden)
  int64_t end = 0, r = 0;
  for (const BatchSequence& s : batch.sequences) {  // each sequence's last logits_rows tokens
    end += s.query_len;
    backend_.RmsNorm(ws.h.data() + (end - s.logits_rows) * hidden, w_.final_norm.data(),
                     s.logits_rows, hidden, config_.rms_norm_eps, ws.X(r, hidden));
    r += s.logits_rows;
  }
  return rows;
}

Status Qwen3Model::Logits(const ForwardBatch& batch, Workspace& ws, std::vector<float>* logits) {
  const int hidden = config_.hidden_size;
  const int64_t rows = FinalNorm(batch, ws);
  const int64_t padded = options_.shard.VocabPadded(config_.vocab_size);
  SPARK_ASSIGN_OR_RETURN(backend::Buffer local, backend_.Allocate(rows * padded));
  const int world = options_.shard.size;
  const int64_t vocab = config_.vocab_size;
  if (world == 1 && w_.vocab.size == vocab) {
    // One rank with the whole vocabulary: the rows download straight into the output, which
    // keeps its capacity across steps. A scored prompt brings back hundreds of full rows a
    // step, and copies through fresh host vectors cost more than the download.
    SPARK_ASSIGN_OR_RETURN(backend::Buffer part, backend_.Allocate(rows * vocab));
    backend_.Linear(ws.X(), rows, hidden, w_.lm_head_weight(), static_cast<int>(vocab),
                    part.data());
    logits->resize(rows * vocab);
    backend_.Download(part.data(), *logits);
    return Status::Ok();
  }
  std::vector<float> local_host(rows * padded);
  if (w_.vocab.size > 0) {
    SPARK_ASSIGN_OR_RETURN(backend::Buffer part, backend_.Allocate(rows * w_.vocab.size));
    backend_.Linear(ws.X(), rows, hidden, w_.lm_head_weight(), static_cast<int>(w_.vocab.size),
                    part.data());
    std::vector<float> part_host(rows * w_.vocab.size);
    backend_.Download(part.data(), part_host);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(&part_host[r * w_.vocab.size], w_.vocab.size, &local_host[r * padded]);
    }
  }
  logits->assign(rows * vocab, 0.0f);
  if (world == 1) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(&local_host[r * padded], vocab, &(*logits)[r * vocab]);
    return Status::Ok();
  }
  std::vector<float> gathered(world * rows * padded);
  SPARK_RETURN_IF_ERROR(comm_->AllGather(local_host.data(), local_host.size(), gathered.data()));
  for (int rank = 0; rank < world; ++rank) {
    const int64_t begin = rank * padded, count = std::min(padded, vocab - begin);
    for (int64_t r = 0; r < rows && count > 0; ++r) {
      std::copy_n(&gathered[(rank * rows + r) * padded], count, &(*logits)[r * vocab + begin]);
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::model::qwen3
