// The weights of a DeepSeek-V4.1 rank in backend memory: what V4.1 shares with V4 as
// dsv4::BackendWeights (dsv4::UploadWeights: projections, mHC sites, MoE, RoPE tables), plus the
// indexer key projections of the KV sources and the Engram projections. The Engram tables stay
// in the mmapped checkpoint (weights.h) and are gathered by row on the host each step.
// Thread-safety: read-only after upload.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v41/weights.h"

namespace spark::engine::model::dsv41 {

struct BackendWeights {
  dsv4::BackendWeights base;
  std::vector<backend::Buffer> index_wk, index_k_norm;     // per layer; empty off KV sources
  std::vector<backend::Buffer> engram_wkv, engram_weight;  // per Engram layer
  std::vector<EngramTable> tables;                         // per Engram layer (host, mmapped)
  std::vector<int> engram_of_layer;                        // per layer: Engram index or -1
};

// Uploads `host`, freeing each host copy once it is in backend memory. ResourceExhausted when the
// backend runs out of memory.
Result<BackendWeights> UploadWeights(Weights host, const core::ModelConfig& config,
                                     backend::Backend& backend);

}  // namespace spark::engine::model::dsv41
