#include "engine/model/deepseek_v4/workspace.h"

#include <utility>
#include <vector>

namespace spark::engine::model::dsv4 {
namespace {

// Every buffer of `ws` with its floats per token: the one list both functions below read.
std::vector<std::pair<backend::Buffer*, int64_t>> Fields(Workspace& ws, const core::ModelConfig& c,
                                                         const ShardRanges& r) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const int64_t hidden = c.hidden_size, n = c.residual_streams, hd = c.head_dim;
  const int64_t heads = r.heads.size, di = d.index_head_dim, ih = d.index_n_heads;
  return {std::pair{&ws.streams, n * hidden},
          {&ws.block_in, hidden},
          {&ws.block_out, hidden},
          {&ws.pre, n},
          {&ws.post, n},
          {&ws.comb, n * n},
          {&ws.qr, int64_t{d.q_lora_rank}},
          {&ws.q, heads * hd},
          {&ws.o, heads * hd},
          {&ws.kv, hd},
          {&ws.grouped, r.groups.size * d.o_lora_rank},
          {&ws.comp_kv, 2 * hd},
          {&ws.comp_gate, 2 * hd},
          {&ws.idx_kv, 2 * di},
          {&ws.idx_gate, 2 * di},
          {&ws.idx_q, ih * di},
          {&ws.idx_w, ih},
          {&ws.selected, int64_t{d.index_topk}},
          {&ws.router, int64_t{c.moe.num_experts}},
          {&ws.expert_ids, int64_t{c.moe.top_k}},
          {&ws.expert_weights, int64_t{c.moe.top_k}}};
}

}  // namespace

int64_t WorkspaceFloatsPerToken(const core::ModelConfig& c, const ShardRanges& r) {
  Workspace ws;
  int64_t floats = 0;
  for (auto [buffer, width] : Fields(ws, c, r)) floats += width;
  return floats;
}

Result<Workspace> AllocateWorkspace(backend::Backend& backend, const core::ModelConfig& c,
                                    const ShardRanges& r, int64_t tokens) {
  Workspace ws;
  ws.tokens = tokens;
  for (auto [buffer, width] : Fields(ws, c, r)) {
    SPARK_ASSIGN_OR_RETURN(*buffer, backend.Allocate(static_cast<size_t>(tokens * width)));
  }
  return ws;
}

}  // namespace spark::engine::model::dsv4
