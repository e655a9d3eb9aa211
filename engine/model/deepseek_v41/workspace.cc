#include "engine/model/deepseek_v41/workspace.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace spark::engine::model::dsv41 {

namespace {

// Every buffer of `ws` with its floats per token: the one list both functions below read.
std::vector<std::pair<backend::Buffer*, int64_t>> Fields(Workspace& ws, const core::ModelConfig& c,
                                                         const dsv4::ShardRanges& r, int stride,
                                                         int engram_columns) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const int64_t hidden = c.hidden_size, n = c.residual_streams, hd = c.head_dim;
  const int64_t heads = r.heads.size, di = d.index_head_dim, ih = d.index_n_heads;
  const int64_t engram = c.dsv41.engram_layer_ids.empty() ? 0 : 1;
  return {std::pair{&ws.streams, n * hidden},
          {&ws.block_in, hidden},
          {&ws.block_out, hidden},
          {&ws.pre_prev, n},
          {&ws.pre, n},
          {&ws.post, n},
          {&ws.comb, n * n},
          {&ws.qr, int64_t{d.q_lora_rank}},
          {&ws.q, heads * hd},
          {&ws.o, heads * hd},
          {&ws.kv, hd},
          {&ws.grouped, r.groups.size * d.o_lora_rank},
          {&ws.comp_kv, hd},
          {&ws.comp_gate, hd},
          {&ws.latent, hd},
          {&ws.index_key, di},
          {&ws.idx_q, ih * di},
          {&ws.idx_w, ih},
          {&ws.selected, int64_t{d.index_topk}},
          {&ws.scores, std::max(stride, 1)},
          {&ws.candidate_mask, std::max(stride, 1)},
          {&ws.router, int64_t{c.moe.num_experts}},
          {&ws.expert_ids, int64_t{c.moe.top_k}},
          {&ws.expert_weights, int64_t{c.moe.top_k}},
          {&ws.engram_rows, engram * engram_columns * c.dsv41.engram_head_dim},
          {&ws.engram_kv, engram * (n + 1) * hidden},
          {&ws.token_ids, engram}};
}

}  // namespace

int64_t WorkspaceFloatsPerToken(const core::ModelConfig& c, const dsv4::ShardRanges& r, int stride,
                                int engram_columns) {
  Workspace ws;
  int64_t floats = 0;
  // Every buffer holds at least one float per token (an empty one would be a null pointer).
  for (auto [buffer, width] : Fields(ws, c, r, stride, engram_columns)) {
    floats += std::max<int64_t>(width, 1);
  }
  return floats;
}

Result<Workspace> AllocateWorkspace(backend::Backend& backend, const core::ModelConfig& c,
                                    const dsv4::ShardRanges& r, int64_t tokens, int stride,
                                    int engram_columns) {
  Workspace ws;
  ws.tokens = tokens;
  ws.stride = stride;
  for (auto [buffer, width] : Fields(ws, c, r, stride, engram_columns)) {
    SPARK_ASSIGN_OR_RETURN(
        *buffer, backend.Allocate(static_cast<size_t>(tokens * std::max<int64_t>(width, 1))));
  }
  return ws;
}

}  // namespace spark::engine::model::dsv41
