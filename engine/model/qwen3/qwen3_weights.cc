#include "engine/model/qwen3/qwen3_weights.h"

#include <string>

#include "engine/core/block_quant.h"

namespace spark::engine::model::qwen3 {
namespace {

using core::TensorSlice;

constexpr int64_t kFp8Block = 128;  // Qwen3-FP8's weight_block_size

// Reads checkpoint tensors (or slices) into backend buffers, checking shapes.
class Loader {
 public:
  Loader(const core::Checkpoint& ckpt, backend::Backend& backend)
      : ckpt_(ckpt), backend_(backend) {}

  Result<backend::Buffer> Load(const std::string& name, const TensorSlice& slice,
                               std::vector<int64_t> shape) {
    SPARK_ASSIGN_OR_RETURN(std::vector<float> host, Read(name, slice, shape));
    return ToBackend(host, shape.back());
  }
  // Waits for the raw copies in flight (call once every weight is read).
  Status Finish() { return backend_.FinishWeightUploads(); }
  Result<backend::Buffer> Vector(const std::string& name, int64_t n) {
    return Load(name, TensorSlice::Whole(), {n});
  }
  // Rows r of tensor `name` ([total_rows, cols]), one part of a stacked matrix.
  struct RowPart {
    std::string name;
    Range r;
    int64_t total_rows;
  };
  // The parts' rows ([*, cols] each) stacked in order into one matrix.
  Result<backend::Buffer> StackedRows(const std::vector<RowPart>& parts, int64_t cols,
                                      backend::DType dtype) {
    if (AllRaw(parts, dtype)) {
      std::vector<RawPart> raw;
      int64_t rows = 0;
      for (const RowPart& part : parts) {
        raw.push_back({part.name, TensorSlice::Rows(part.r.begin, part.r.size),
                       {part.total_rows, cols}, {part.r.size, cols}});
        rows += part.r.size;
      }
      return UploadRaw(raw, rows, cols, dtype);
    }
    std::vector<float> all;
    for (const RowPart& part : parts) {
      SPARK_ASSIGN_OR_RETURN(std::vector<float> rows,
                             ReadRows(part.name, part.r, part.total_rows, cols));
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return ToBackend(all, cols, dtype);
  }
  Result<backend::Buffer> Rows(const std::string& name, Range r, int64_t total_rows, int64_t cols,
                               backend::DType dtype = backend::DType::kF32) {
    if (IsRaw(name, dtype)) {
      return UploadRaw({{name, TensorSlice::Rows(r.begin, r.size), {total_rows, cols}, {r.size, cols}}},
                       r.size, cols, dtype);
    }
    SPARK_ASSIGN_OR_RETURN(std::vector<float> host, ReadRows(name, r, total_rows, cols));
    return ToBackend(host, cols, dtype);
  }
  Result<backend::Buffer> Cols(const std::string& name, Range c, int64_t rows, int64_t total_cols,
                               backend::DType dtype) {
    if (IsRaw(name, dtype)) {
      return UploadRaw({{name, TensorSlice::Cols(c.begin, c.size), {rows, total_cols}, {rows, c.size}}},
                       rows, c.size, dtype);
    }
    SPARK_RETURN_IF_ERROR(CheckShape(name, {rows, total_cols}));
    SPARK_ASSIGN_OR_RETURN(std::vector<float> host,
                           Read(name, TensorSlice::Cols(c.begin, c.size), {rows, c.size}));
    return ToBackend(host, c.size, dtype);
  }

 private:
  // A slice of a 2-d tensor of `full` shape, `shape` once sliced.
  struct RawPart {
    std::string name;
    TensorSlice slice;
    std::vector<int64_t> full;
    std::vector<int64_t> shape;
  };
  // Whether `name` is stored as `dtype` already (or as bf16 for fp32), without block scales, on
  // a backend that takes raw bytes: then its bytes go to the backend as they are (WeightBytes;
  // bf16 widened there), with no conversion on the host.
  bool IsRaw(const std::string& name, backend::DType dtype) {
    if (!raw_) return false;
    Result<const core::TensorInfo*> info = ckpt_.Info(name);
    if (!info.ok() || ckpt_.Has(name + "_scale_inv")) return false;
    const core::DType stored = (*info)->dtype;
    return (stored == core::DType::kBF16 &&
            (dtype == backend::DType::kBF16 || dtype == backend::DType::kF32)) ||
           (stored == core::DType::kF32 && dtype == backend::DType::kF32);
  }
  template <typename Parts>
  bool AllRaw(const Parts& parts, backend::DType dtype) {
    for (const auto& part : parts) {
      if (!IsRaw(part.name, dtype)) return false;
    }
    return true;
  }
  // The parts stacked by rows into one [rows, cols] matrix.
  Result<backend::Buffer> UploadRaw(const std::vector<RawPart>& parts, int64_t rows, int64_t cols,
                                    backend::DType dtype) {
    SPARK_ASSIGN_OR_RETURN(backend::Buffer buffer, backend_.AllocateMatrix(rows, cols, dtype));
    size_t offset = 0;
    for (const RawPart& part : parts) {
      SPARK_RETURN_IF_ERROR(CheckShape(part.name, part.full));
      SPARK_ASSIGN_OR_RETURN(core::Checkpoint::Region region,
                             ckpt_.RawRegion(part.name, part.slice, part.shape));
      backend::Backend::WeightBytes bytes{region.data, region.rows, region.run_bytes,
                                          region.stride};
      bytes.fd = region.fd;
      bytes.file_offset = region.file_offset;
      bytes.widen_bf16 = region.dtype == core::DType::kBF16 && dtype == backend::DType::kF32;
      Status s = backend_.UploadWeightBytes(bytes, buffer, offset);
      if (s.code() == StatusCode::kUnimplemented) {
        raw_ = false;  // this backend converts through fp32: load this part that way too
        return Fallback(parts, cols, dtype);
      }
      SPARK_RETURN_IF_ERROR(s);
      offset += bytes.dst_size();
    }
    return buffer;
  }
  Result<backend::Buffer> Fallback(const std::vector<RawPart>& parts, int64_t cols,
                                   backend::DType dtype) {
    std::vector<float> all;
    for (const RawPart& part : parts) {
      SPARK_ASSIGN_OR_RETURN(std::vector<float> v, Read(part.name, part.slice, part.shape));
      all.insert(all.end(), v.begin(), v.end());
    }
    return ToBackend(all, cols, dtype);
  }
  Result<std::vector<float>> ReadRows(const std::string& name, Range r, int64_t total_rows,
                                      int64_t cols) {
    SPARK_RETURN_IF_ERROR(CheckShape(name, {total_rows, cols}));
    return Read(name, TensorSlice::Rows(r.begin, r.size), {r.size, cols});
  }
  // The tensor (or slice) as fp32; an FP8 checkpoint's block scales applied (Qwen3-FP8:
  // "<x>.weight" in F8_E4M3 next to "<x>.weight_scale_inv" [ceil(rows/128), ceil(cols/128)];
  // value = fp8 element x the scale of its 128 x 128 block).
  Result<std::vector<float>> Read(const std::string& name, const TensorSlice& slice,
                                  const std::vector<int64_t>& shape) {
    SPARK_ASSIGN_OR_RETURN(std::vector<float> values, ckpt_.Read(name, slice, shape));
    SPARK_ASSIGN_OR_RETURN(const core::TensorInfo* info, ckpt_.Info(name));
    const std::string scale_name = name + "_scale_inv";
    if (!ckpt_.Has(scale_name)) {
      if (info->dtype == core::DType::kF8E4M3) {
        return InvalidArgumentError("tensor '" + name + "' is F8_E4M3 but '" + scale_name +
                                    "' (its block scales) is missing");
      }
      return values;
    }
    if (info->shape.size() != 2 || shape.size() != 2) {
      return InvalidArgumentError("tensor '" + name + "' has block scales but is not 2-d");
    }
    const int64_t rows = info->shape[0], cols = info->shape[1];
    const int64_t scale_cols = core::ScaleBlocks(cols, kFp8Block);
    SPARK_RETURN_IF_ERROR(
        ckpt_.CheckShape(scale_name, {core::ScaleBlocks(rows, kFp8Block), scale_cols}));
    SPARK_ASSIGN_OR_RETURN(std::vector<float> scales, ckpt_.Read(scale_name));
    const int64_t r0 = slice.dim == 0 ? slice.start : 0, c0 = slice.dim == 1 ? slice.start : 0;
    core::ApplyBlockScales(values, shape[1], r0, c0, scales, scale_cols, {kFp8Block, kFp8Block});
    return values;
  }
  Status CheckShape(const std::string& name, const std::vector<int64_t>& shape) {
    return ckpt_.CheckShape(name, shape);
  }
  // `host` [*, cols] in backend memory as `dtype` (fp8: quantised per block, see backend.h).
  Result<backend::Buffer> ToBackend(const std::vector<float>& host, int64_t cols,
                                    backend::DType dtype = backend::DType::kF32) {
    const int64_t rows = cols > 0 ? static_cast<int64_t>(host.size()) / cols : 0;
    SPARK_ASSIGN_OR_RETURN(backend::Buffer buffer, backend_.AllocateMatrix(rows, cols, dtype));
    if (!host.empty()) backend_.UploadMatrix(host, cols, buffer);
    return buffer;
  }
  const core::Checkpoint& ckpt_;
  backend::Backend& backend_;
  bool raw_ = true;  // until the backend says it takes no raw bytes
};

Status LoadAttention(Loader& ld, const std::string& p, const core::ModelConfig& c,
                     const Qwen3Weights& w, backend::DType dt, Qwen3LayerWeights* l) {
  const int64_t hd = c.head_dim, hidden = c.hidden_size;
  const Range q_rows{w.heads.begin * hd, w.heads.size * hd};
  const Range kv_rows{w.kv_heads.begin * hd, w.kv_heads.size * hd};
  const Loader::RowPart parts[] = {{p + "self_attn.q_proj.weight", q_rows, c.num_heads * hd},
                                   {p + "self_attn.k_proj.weight", kv_rows, c.num_kv_heads * hd},
                                   {p + "self_attn.v_proj.weight", kv_rows, c.num_kv_heads * hd}};
  if (dt == backend::DType::kFP8) {
    // Each with its own block grid (an fp8 matrix has no views; see backend.h).
    backend::Buffer* out[] = {&l->q, &l->k, &l->v};
    for (int i = 0; i < 3; ++i) {
      SPARK_ASSIGN_OR_RETURN(*out[i],
                             ld.Rows(parts[i].name, parts[i].r, parts[i].total_rows, hidden, dt));
    }
  } else {
    SPARK_ASSIGN_OR_RETURN(l->qkv, ld.StackedRows({parts[0], parts[1], parts[2]}, hidden, dt));
    l->SplitQkv(q_rows.size, kv_rows.size, hidden);
  }
  SPARK_ASSIGN_OR_RETURN(
      l->o, ld.Cols(p + "self_attn.o_proj.weight", q_rows, hidden, c.num_heads * hd, dt));
  SPARK_ASSIGN_OR_RETURN(l->q_norm, ld.Vector(p + "self_attn.q_norm.weight", hd));
  SPARK_ASSIGN_OR_RETURN(l->k_norm, ld.Vector(p + "self_attn.k_norm.weight", hd));
  SPARK_ASSIGN_OR_RETURN(l->input_norm, ld.Vector(p + "input_layernorm.weight", hidden));
  SPARK_ASSIGN_OR_RETURN(l->post_attention_norm,
                         ld.Vector(p + "post_attention_layernorm.weight", hidden));
  return Status::Ok();
}

// gate_proj/up_proj/down_proj under prefix `p` (a dense MLP or one expert), split by `r`.
Status LoadSwiGlu(Loader& ld, const std::string& p, int64_t inter, int64_t hidden, Range r,
                  backend::DType dt, backend::Buffer* gate_up, backend::Buffer* down) {
  SPARK_ASSIGN_OR_RETURN(*gate_up, ld.StackedRows({{p + "gate_proj.weight", r, inter},
                                                   {p + "up_proj.weight", r, inter}},
                                                  hidden, dt));
  SPARK_ASSIGN_OR_RETURN(*down, ld.Cols(p + "down_proj.weight", r, hidden, inter, dt));
  return Status::Ok();
}

Status LoadMoe(Loader& ld, const std::string& p, const core::ModelConfig& c, const TpShard& shard,
               MoeSharding mode, backend::DType dt, Qwen3Weights* w, Qwen3LayerWeights* l) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size;
  SPARK_ASSIGN_OR_RETURN(l->router, ld.Load(p + "mlp.gate.weight", core::TensorSlice::Whole(),
                                            {c.moe.num_experts, hidden}));
  const Range experts =
      mode == MoeSharding::kByExpert ? shard.Even(c.moe.num_experts) : Range{0, c.moe.num_experts};
  const Range channels = mode == MoeSharding::kByExpert ? Range{0, inter} : shard.Even(inter);
  w->expert_begin = static_cast<int>(experts.begin);
  w->expert_inter = static_cast<int>(channels.size);
  for (int64_t e = experts.begin; e < experts.end(); ++e) {
    backend::Buffer gate_up, down;
    SPARK_RETURN_IF_ERROR(LoadSwiGlu(ld, p + "mlp.experts." + std::to_string(e) + ".", inter,
                                     hidden, channels, dt, &gate_up, &down));
    l->expert_gate_up.push_back(std::move(gate_up));
    l->expert_down.push_back(std::move(down));
  }
  return Status::Ok();
}

}  // namespace

Result<Qwen3Weights> LoadQwen3Weights(const core::Checkpoint& ckpt, const core::ModelConfig& c,
                                      const TpShard& shard, MoeSharding moe_sharding,
                                      backend::DType matrix_dtype, backend::Backend& backend) {
  SPARK_RETURN_IF_ERROR(shard.CheckFits(c, moe_sharding));
  Loader ld(ckpt, backend);
  Qwen3Weights w;
  w.heads = shard.Heads(c);
  w.kv_heads = shard.KvHeads(c);
  w.vocab = shard.Vocab(c.vocab_size);
  const int64_t hidden = c.hidden_size;
  SPARK_ASSIGN_OR_RETURN(w.embed,
                         ld.Rows("model.embed_tokens.weight", w.vocab, c.vocab_size, hidden));
  if (!c.tie_word_embeddings) {
    SPARK_ASSIGN_OR_RETURN(w.lm_head,
                           ld.Rows("lm_head.weight", w.vocab, c.vocab_size, hidden, matrix_dtype));
  }
  SPARK_ASSIGN_OR_RETURN(w.final_norm, ld.Vector("model.norm.weight", hidden));
  const Range dense = shard.Even(c.intermediate_size);
  w.dense_inter = static_cast<int>(dense.size);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Qwen3LayerWeights l;
    l.mlp = c.layers[i].mlp;
    SPARK_RETURN_IF_ERROR(LoadAttention(ld, p, c, w, matrix_dtype, &l));
    if (l.mlp == core::MlpType::kMoe) {
      SPARK_RETURN_IF_ERROR(LoadMoe(ld, p, c, shard, moe_sharding, matrix_dtype, &w, &l));
    } else {
      SPARK_RETURN_IF_ERROR(LoadSwiGlu(ld, p + "mlp.", c.intermediate_size, hidden, dense,
                                       matrix_dtype, &l.gate_up, &l.down));
    }
    w.layers.push_back(std::move(l));
  }
  SPARK_RETURN_IF_ERROR(ld.Finish());
  return w;
}

}  // namespace spark::engine::model::qwen3
