// The two mHC steps every V4.1 block runs at each of its sites, shared by the backbone
// (deepseek_v41_model.h) and the DSpark draft stack (dspark.h): a site's mixing weights, and a
// block input collapsed from the residual streams and normalised.
// Thread-safety: free functions over the caller's workspace.
#pragma once

#include "engine/backend/backend.h"
#include "engine/backend/deepseek_ops.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/backend_weights.h"
#include "engine/model/deepseek_v41/workspace.h"

namespace spark::engine::model::dsv41 {

// The mHC weights of site `hc` for ws.streams into *pre, ws.post and ws.comb.
void MixSite(backend::DeepseekOps& ops, const core::ModelConfig& config,
             const dsv4::HcBuffers& hc, backend::Buffer* pre, Workspace& ws);

// ws.block_in = RmsNorm_norm(collapse(ws.streams, pre)).
void CollapseNorm(backend::Backend& backend, backend::DeepseekOps& ops,
                  const core::ModelConfig& config, const backend::Buffer& pre,
                  const backend::Buffer& norm, Workspace& ws);

}  // namespace spark::engine::model::dsv41
