#include "engine/model/deepseek_v41/hc_site.h"

namespace spark::engine::model::dsv41 {

void MixSite(backend::DeepseekOps& ops, const core::ModelConfig& c, const dsv4::HcBuffers& hc,
             backend::Buffer* pre, Workspace& ws) {
  ops.HcMix({.streams = ws.streams.data(),
             .tokens = ws.tokens,
             .n = c.residual_streams,
             .hidden = c.hidden_size,
             .fn = hc.fn.data(),
             .base = hc.base.data(),
             .scale = hc.scale.data(),
             .norm_eps = c.rms_norm_eps,
             .hc_eps = c.dsv4.hc_eps,
             .sinkhorn_iters = c.dsv4.hc_sinkhorn_iters,
             .pre = pre->data(),
             .post = ws.post.data(),
             .comb = ws.comb.data()});
}

void CollapseNorm(backend::Backend& backend, backend::DeepseekOps& ops, const core::ModelConfig& c,
                  const backend::Buffer& pre, const backend::Buffer& norm, Workspace& ws) {
  ops.HcCollapse(ws.streams.data(), pre.data(), ws.tokens, c.residual_streams, c.hidden_size,
                 ws.block_in.data());
  backend.RmsNorm(ws.block_in.data(), norm.data(), ws.tokens, c.hidden_size, c.rms_norm_eps,
                  ws.block_in.data());
}

}  // namespace spark::engine::model::dsv41
