// TensorLoader: reads the tensors of a DeepSeek checkpoint (TensorSource) into fp32 host
// vectors by their released names, whichever naming the checkpoint uses (a TensorNaming: the
// candidate names of a released name and the tensors the forward pass does not use), and
// dequantises the released formats on the way (FP8 E4M3 with 128x128, 64x64 or 32x32 block
// scales, packed FP4 e2m1 with 1x32 scales: block_quant.h). It records which tensors were
// consumed so that CheckAllUsed names every tensor the config gives no place to. DeepSeek-V4
// and V4.1 share it; each passes its own naming.
// Thread-safety: one loader per load.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/deepseek_v4/matrix.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv4 {

struct TensorNaming {
  std::vector<std::string> (*candidates)(const std::string& canonical);
  bool (*ignored)(const std::string& name);  // kept in the checkpoint, unused by the forward
};

// DeepSeek-V4's naming (weight_names.h).
TensorNaming V4Naming();

class Loader {
 public:
  Loader(const TensorSource& src, ReadObserver on_read, TensorNaming naming = V4Naming(),
         WeightTypes types = {})
      : src_(src), on_read_(std::move(on_read)), naming_(naming), types_(types) {}

  // The tensor stored under one of `canonical`'s names, or nullptr.
  const RawTensor* Lookup(const std::string& canonical) const;
  bool Has(const std::string& canonical) const { return Lookup(canonical) != nullptr; }
  // fp32 values of `canonical`, which must have `shape` (packed FP4 holds [rows, cols / 2]
  // bytes). NotFound naming every name tried; InvalidArgument for a shape or dtype mismatch;
  // DataLoss for scales that fit no block size.
  Result<Vec> Float(const std::string& canonical, const std::vector<int64_t>& shape);
  // A weight matrix `shape` [rows, cols]: packed as released (FP8 with UE8M0 or power-of-two
  // scales, FP4) when the loader's WeightTypes keep quantised matrices, else fp32 values. The
  // errors of Float.
  Result<Mat> Matrix(const std::string& canonical, const std::vector<int64_t>& shape);
  // An I64 or I32 table as int32.
  Result<std::vector<int32_t>> Ints(const std::string& canonical,
                                    const std::vector<int64_t>& shape);
  // Records `t` as consumed; the first time, reports its bytes to the read observer.
  void Use(const RawTensor& t);
  void MarkUsed(const RawTensor& t) { Use(t); }
  // Marks the w1/w2/w3 tensors (and scales) under `prefix` as accounted for without reading them.
  void Skip(const std::string& prefix);
  // The scale tensor next to a weight ("<x>.scale" or "<x>.weight_scale_inv"), marked used.
  const RawTensor* ScaleOf(const RawTensor& w);

  // InvalidArgument naming every tensor that nothing consumed.
  Status CheckAllUsed() const;
  Status Missing(const std::string& canonical) const;
  static Status ShapeError(const RawTensor& t, const std::vector<int64_t>& shape);

 private:
  Result<Vec> Floats(const RawTensor& t, const std::vector<int64_t>& shape);
  // The released bytes of `t` packed (Mat), or nullopt-like empty Mat when they cannot be kept.
  Result<Mat> Packed(const RawTensor& t, const std::vector<int64_t>& shape);
  Result<Vec> Convert(const RawTensor& t);
  Result<Vec> ScaleValues(const RawTensor& s);
  Result<Vec> Fp8(const RawTensor& w, const RawTensor& s, const std::vector<int64_t>& shape);
  Result<Vec> Fp4(const RawTensor& w, const std::vector<int64_t>& shape);

  const TensorSource& src_;
  ReadObserver on_read_;
  TensorNaming naming_;
  WeightTypes types_;
  std::set<std::string> used_;
};

// Rows [r.begin, r.end()) of a row-major [*, cols] matrix.
Vec SliceRows(const Vec& m, int64_t cols, Range r);

// An mHC site's fn [N(N+2), N*hidden], base and scale [3] under `p` ("layers.3.").
Status LoadHc(Loader& ld, const std::string& p, const std::string& site, int64_t n, int64_t hidden,
              HyperConnectionWeights* hc);
// Channels `ch` of w1 then of w3, as one [2 * ch.size, hidden] matrix; w2's columns `ch`.
Status LoadSwiGlu(Loader& ld, const std::string& p, int64_t inter, int64_t hidden, Range ch,
                  Mat* gate_up, Mat* down);

// The attention tensors V4 and V4.1 share under `p` ("layers.3."): attn_norm, sinks and wq_b of
// this rank's heads, wq_a, q_norm, wkv, kv_norm, wo_a blocks of its groups and wo_b columns.
Status LoadAttentionCore(Loader& ld, const std::string& p, const core::ModelConfig& c,
                         const ShardRanges& r, LayerWeights* l);
// ffn_norm, the router (and its bias, or tid2eid for hash layers), the shared expert and this
// rank's routed experts (per-expert or transformers' fused tensors) of `layer`.
Status LoadMoe(Loader& ld, const TensorSource& src, int layer, const core::ModelConfig& c,
               const ShardRanges& r, LayerWeights* l);
// LoadMoe under prefix `p` ("mtp.0."); `layer` names transformers' fused expert tensors.
Status LoadMoeAt(Loader& ld, const TensorSource& src, const std::string& p, int layer,
                 const core::ModelConfig& c, const ShardRanges& r, LayerWeights* l);

}  // namespace spark::engine::model::dsv4
