#include "engine/model/deepseek_v41/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "engine/core/dtype.h"
#include "engine/model/deepseek_v4/tensor_loader.h"
#include "engine/model/deepseek_v41/weight_names.h"

namespace spark::engine::model::dsv41 {
namespace {

using dsv4::Loader;
using dsv4::RawTensor;

std::string Layer(int i) { return "layers." + std::to_string(i) + "."; }

// The shared compressor of a KV source and the indexer of an index source.
Status LoadCompressed(Loader& ld, int i, const core::ModelConfig& c, dsv4::LayerWeights* l,
                      LayerExtras* x) {
  const core::DeepseekV41Settings& s = c.dsv41;
  const std::string p = Layer(i) + "attn.";
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const int64_t di = c.dsv4.index_head_dim, ih = c.dsv4.index_n_heads;
  if (s.IsKvSource(i)) {
    SPARK_ASSIGN_OR_RETURN(l->compressor.wkv, ld.Matrix(p + "compressor.wkv.weight", {hd, hidden}));
    if (s.compress_ratios[i] > 1) {
      SPARK_ASSIGN_OR_RETURN(l->compressor.wgate,
                             ld.Matrix(p + "compressor.wgate.weight", {hd, hidden}));
    }
    SPARK_ASSIGN_OR_RETURN(l->compressor.norm, ld.Float(p + "compressor.norm.weight", {hd}));
    SPARK_ASSIGN_OR_RETURN(x->index_wk, ld.Matrix(p + "indexer.wk.weight", {di, hd}));
    SPARK_ASSIGN_OR_RETURN(x->index_k_norm, ld.Float(p + "indexer.k_norm.weight", {di}));
  }
  if (!s.IsIndexSource(i)) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(l->index_wq_b,
                         ld.Matrix(p + "indexer.wq_b.weight", {ih * di, c.dsv4.q_lora_rank}));
  SPARK_ASSIGN_OR_RETURN(l->index_weights,
                         ld.Matrix(p + "indexer.weights_proj.weight", {ih, hidden}));
  return Status::Ok();
}

// Random row reads: without the hint every row fault reads ahead ~100 KB of neighbours that the
// next lookups almost never use (measured: 82 MB resident for 768 rows of a 1.6 GB table).
void AdviseRandom(const RawTensor& t) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.bytes.data()) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(t.bytes.data() + t.bytes.size());
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_RANDOM);  // a hint: errors ignored
}

Result<EngramTable> OpenTable(Loader& ld, const std::string& p, int64_t rows, int dim,
                              int64_t needed) {
  const std::string name = p + "embed.weight";
  const RawTensor* w = ld.Lookup(name);
  if (w == nullptr) return ld.Missing(name);
  ld.Use(*w);
  if (w->shape != std::vector<int64_t>{rows, dim}) return Loader::ShapeError(*w, {rows, dim});
  if (rows < needed) {
    return InvalidArgumentError(w->file + ": Engram table '" + w->name + "' has " +
                                std::to_string(rows) + " rows but its prime buckets need " +
                                std::to_string(needed) + "; engram_num_embeddings and " +
                                "engram_vocab_size must match the checkpoint");
  }
  SPARK_ASSIGN_OR_RETURN(core::DType dtype, core::ParseDType(w->dtype));
  const RawTensor* scale = ld.ScaleOf(*w);
  AdviseRandom(*w);
  if (scale != nullptr) AdviseRandom(*scale);
  if (dtype != core::DType::kF8E4M3) {
    if (dtype != core::DType::kF32 && dtype != core::DType::kBF16 && dtype != core::DType::kF16) {
      return InvalidArgumentError(w->file + ": Engram table '" + w->name + "': dtype " + w->dtype +
                                  " is not supported (F8_E4M3 with scales, F32, BF16 or F16)");
    }
    return EngramTable(w, nullptr, dtype, rows, dim);  // float tables ignore their scale
  }
  const std::vector<int64_t> scale_shape = {rows, dim / 32};
  if (scale == nullptr) {
    return NotFoundError(w->file + ": F8_E4M3 Engram table '" + w->name + "' has no '" + p +
                         "embed.scale' [" + std::to_string(rows) + ", " + std::to_string(dim / 32) +
                         "] tensor");
  }
  if (scale->shape != scale_shape) return Loader::ShapeError(*scale, scale_shape);
  if (scale->dtype != "F8_E8M0" && scale->dtype != "F32") {
    return InvalidArgumentError(scale->file + ": tensor '" + scale->name + "': dtype " +
                                scale->dtype + " is not an Engram scale (F8_E8M0 or F32)");
  }
  return EngramTable(w, scale, dtype, rows, dim);
}

Status LoadEngram(Loader& ld, int i, int e, const core::ModelConfig& c,
                  const EngramHashing& hashing, EngramWeights* out) {
  const core::DeepseekV41Settings& s = c.dsv41;
  const std::string p = Layer(i) + "engram.";
  const int64_t hidden = c.hidden_size, n = c.residual_streams, hd = s.engram_head_dim;
  SPARK_ASSIGN_OR_RETURN(out->wkv,
                         ld.Matrix(p + "wkv.weight", {(n + 1) * hidden, hashing.columns() * hd}));
  SPARK_ASSIGN_OR_RETURN(Vec q, ld.Float(p + "q_weight", {n, hidden}));
  SPARK_ASSIGN_OR_RETURN(Vec k, ld.Float(p + "k_weight", {n, hidden}));
  out->weight.resize(q.size());
  for (size_t j = 0; j < q.size(); ++j) out->weight[j] = q[j] * k[j];
  SPARK_ASSIGN_OR_RETURN(out->table, OpenTable(ld, p, s.engram_num_embeddings[e],
                                               static_cast<int>(hd), hashing.RowsNeeded(e)));
  return Status::Ok();
}

Status LoadLayer(Loader& ld, const dsv4::TensorSource& src, int i, const core::ModelConfig& c,
                 const dsv4::ShardRanges& r, dsv4::LayerWeights* l, LayerExtras* x) {
  const std::string p = Layer(i);
  const int64_t hidden = c.hidden_size, n = c.residual_streams;
  l->attention = c.layers[i].attention;
  l->mlp = core::MlpType::kMoe;
  SPARK_RETURN_IF_ERROR(dsv4::LoadHc(ld, p, "attn", n, hidden, &l->hc_attn));
  SPARK_RETURN_IF_ERROR(dsv4::LoadHc(ld, p, "ffn", n, hidden, &l->hc_ffn));
  SPARK_RETURN_IF_ERROR(dsv4::LoadAttentionCore(ld, p, c, r, l));
  SPARK_RETURN_IF_ERROR(LoadCompressed(ld, i, c, l, x));
  SPARK_RETURN_IF_ERROR(dsv4::LoadMoe(ld, src, i, c, r, l));
  SPARK_ASSIGN_OR_RETURN(x->router_bias_vl,
                         ld.Float(p + "ffn.gate.bias_vl", {int64_t{c.moe.num_experts}}));
  return Status::Ok();
}

// Page-aligned [begin, end) of `bytes` bytes at `at`.
std::pair<uintptr_t, uintptr_t> Pages(const uint8_t* at, size_t bytes, uintptr_t page) {
  const auto begin = reinterpret_cast<uintptr_t>(at) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(at) + bytes + page - 1) & ~(page - 1);
  return {begin, end};
}

}  // namespace

int64_t EngramTable::Prefetch(std::span<const int64_t> ids) const {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const size_t row = static_cast<size_t>(dim_) * core::DTypeSize(dtype_);
  const size_t scale_row = scale_ == nullptr ? 0 : scale_->element_size * (dim_ / 32);
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  ranges.reserve(ids.size() * 2);
  for (const int64_t id : ids) {
    ranges.push_back(Pages(weight_->bytes.data() + id * row, row, page));
    if (scale_row > 0) {
      ranges.push_back(Pages(scale_->bytes.data() + id * scale_row, scale_row, page));
    }
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t asked = 0;
  for (size_t i = 0; i < ranges.size();) {
    auto [begin, end] = ranges[i];
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i) {
      end = std::max(end, ranges[i].second);
    }
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);  // a hint: errors ignored
    ++asked;
  }
  return asked;
}

void EngramTable::Gather(std::span<const int64_t> ids, float* out) const {
  const size_t elem = core::DTypeSize(dtype_);
  const int blocks = dim_ / 32;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* row = out + i * dim_;
    core::ConvertToFloat(dtype_, weight_->bytes.data() + ids[i] * dim_ * elem, dim_, row);
    if (scale_ == nullptr) continue;
    for (int b = 0; b < blocks; ++b) {
      float s = 0;
      if (scale_->dtype == "F8_E8M0") {
        s = core::F8E8M0ToFloat(scale_->bytes[ids[i] * blocks + b]);
      } else {
        core::ConvertToFloat(core::DType::kF32, scale_->bytes.data() + (ids[i] * blocks + b) * 4, 1,
                             &s);
      }
      for (int j = 0; j < 32; ++j) row[b * 32 + j] *= s;
    }
  }
}

Result<Weights> LoadWeights(const dsv4::TensorSource& source, const core::ModelConfig& c,
                            const EngramHashing* hashing, const TpShard& shard, MoeSharding moe,
                            dsv4::ReadObserver on_read, dsv4::WeightTypes types) {
  Loader ld(source, std::move(on_read), V41Naming(), types);
  Weights w;
  dsv4::Weights& b = w.base;
  b.types = types;
  SPARK_ASSIGN_OR_RETURN(b.ranges, dsv4::PlanShard(c, shard, moe));
  const dsv4::ShardRanges& r = b.ranges;
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size;
  SPARK_ASSIGN_OR_RETURN(Vec embed, ld.Float("embed.weight", {vocab, hidden}));
  b.embed = dsv4::SliceRows(embed, hidden, r.vocab);
  if (!c.tie_word_embeddings) {
    SPARK_ASSIGN_OR_RETURN(dsv4::Mat head, ld.Matrix("head.weight", {vocab, hidden}));
    b.head = dsv4::SliceRows(head, r.vocab);
  }
  SPARK_ASSIGN_OR_RETURN(b.final_norm, ld.Float("norm.weight", {hidden}));
  b.layers.resize(c.num_layers);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    SPARK_RETURN_IF_ERROR(LoadLayer(ld, source, i, c, r, &b.layers[i], &w.layers[i]));
    const int e = c.dsv41.EngramIndex(i);
    if (e < 0) continue;
    if (hashing == nullptr) return InternalError("Engram layers need their hashing to load");
    w.layers[i].engram = static_cast<int>(w.engram.size());
    SPARK_RETURN_IF_ERROR(LoadEngram(ld, i, e, c, *hashing, &w.engram.emplace_back()));
  }
  SPARK_RETURN_IF_ERROR(ld.CheckAllUsed());
  return w;
}

}  // namespace spark::engine::model::dsv41
