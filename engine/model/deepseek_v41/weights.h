// The weights of a DeepSeek-V4.1 rank as the loader reads them. The tensors V4.1 shares with V4
// (mHC sites, attention projections, MoE) are held in dsv4::Weights and sharded by the same plan
// (dsv4::PlanShard: heads, output groups, experts, vocabulary); V4.1 adds per layer the shared
// compressor of a KV source (wkv, wgate when the ratio is above 1, norm: in dsv4's
// CompressorWeights), the indexer (wq_b, weights_proj; wk and k_norm at a KV source), the router's
// bias_vl (image tokens; read and checked, unused by this text-only engine) and Engram (wkv,
// q_weight x k_weight, and the table, which stays in the mmapped checkpoint: EngramTable).
// One mapping table names the tensors (weight_names.h); every missing, mis-shaped or unexpected
// tensor is an error naming it, and so is a table that does not cover its prime buckets.
// Thread-safety: read-only after loading; tables read by any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/dtype.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/deepseek_v41/engram_hash.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv41 {

using dsv4::Vec;

// One Engram table [rows, dim] read by row from the checkpoint's mapping: F8_E4M3 values with
// per-row, per-32-channel scales (F8_E8M0 or F32), or a float table (F32 / BF16 / F16, whose
// scale the reference ignores). Only the pages of the rows looked up are touched.
class EngramTable {
 public:
  EngramTable() = default;
  EngramTable(const dsv4::RawTensor* weight, const dsv4::RawTensor* scale, core::DType dtype,
              int64_t rows, int dim)
      : weight_(weight), scale_(scale), dtype_(dtype), rows_(rows), dim_(dim) {}

  int64_t rows() const { return rows_; }
  int dim() const { return dim_; }
  // out[i * dim ..] = dequantised row ids[i]; ids must be in [0, rows).
  void Gather(std::span<const int64_t> ids, float* out) const;
  // Asks the kernel to start reading the pages that rows `ids` (in [0, rows)) and their scales
  // live on, all at once (MADV_WILLNEED, a hint: it returns before the reads finish), so a
  // later Gather of them waits on reads that are already under way instead of faulting the
  // pages in one at a time. The number of page ranges asked for.
  int64_t Prefetch(std::span<const int64_t> ids) const;

 private:
  const dsv4::RawTensor* weight_ = nullptr;
  const dsv4::RawTensor* scale_ = nullptr;  // null for float tables
  core::DType dtype_ = core::DType::kF32;
  int64_t rows_ = 0;
  int dim_ = 0;
};

struct EngramWeights {
  dsv4::Mat wkv;  // [(hc + 1) * hidden, columns * engram_head_dim]
  Vec weight;  // [hc, hidden]: q_weight * k_weight (the reference only uses the product)
  EngramTable table;
};

struct LayerExtras {
  dsv4::Mat index_wk;          // [dI, D] at KV sources that run the indexer
  Vec index_k_norm;            // [dI]
  Vec router_bias_vl;          // [experts]
  int engram = -1;             // index into Weights::engram, or -1
};

struct Weights {
  dsv4::Weights base;                 // shared with V4 (hc_head_* empty: V4.1 has none)
  std::vector<LayerExtras> layers;    // per layer
  std::vector<EngramWeights> engram;  // per Engram layer, in engram_layer_ids order
};

// Reads this rank's weights from `source`, which must outlive the result (the Engram tables
// point into its mapping). NotFound naming the tensor and every name tried; InvalidArgument for
// a shape that disagrees with config.json (both shapes named), an unexpected tensor, an Engram
// table whose row count is not engram_num_embeddings or does not cover its prime buckets, or a
// world size that does not divide the sharded dimensions.
Result<Weights> LoadWeights(const dsv4::TensorSource& source, const core::ModelConfig& config,
                            const EngramHashing* hashing, const TpShard& shard = {},
                            MoeSharding moe = MoeSharding::kByExpert,
                            dsv4::ReadObserver on_read = {}, dsv4::WeightTypes types = {});

}  // namespace spark::engine::model::dsv41
