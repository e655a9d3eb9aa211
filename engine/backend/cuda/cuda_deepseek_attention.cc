// CudaDeepseekOps: the lightning indexer's scores and top-k (kernels/deepseek_indexer.h) and
// sparse attention with sinks (kernels/deepseek_attention.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_internal.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "kernels/deepseek_attention.h"
#include "kernels/deepseek_cache.h"
#include "kernels/deepseek_indexer.h"

namespace spark::engine::backend::cuda {
namespace {

using internal::Rows;

// Score rows held at once when the caller wants no scores back (the rest run in further passes
// over the same scratch): 128 MiB.
constexpr int64_t kScoreScratchFloats = int64_t{32} << 20;
// With a mask and no scores wanted, each row scores only its unmasked candidates (listed first
// by CompactCandidates) when rows share no list (decode) or lists reach this length: V4.1's
// candidate blocks keep 16K candidates, so a 64K context scores a quarter of them, 1M a 64th.
// Shorter shared lists keep several rows a group (each key read once for them) instead.
constexpr int kCompactFromCandidates = 32768;

// The candidate lists must lie inside `slots`; returns the largest count.
Result<int> CheckCandidates(const EntryCandidates& c, const char* op) {
  if (c.first.size() < c.count.size()) {
    return InvalidArgumentError(std::string("cuda backend: ") + op + " got " +
                                std::to_string(c.first.size()) + " list starts for " +
                                std::to_string(c.count.size()) + " counts");
  }
  int max_count = 0;
  for (size_t t = 0; t < c.count.size(); ++t) {
    if (c.count[t] < 0 ||
        (c.count[t] > 0 &&
         (c.first[t] < 0 || c.first[t] + c.count[t] > static_cast<int64_t>(c.slots.size())))) {
      return InvalidArgumentError(std::string("cuda backend: ") + op + ": query " +
                                  std::to_string(t) + "'s candidates run past the " +
                                  std::to_string(c.slots.size()) + " listed slots");
    }
    max_count = std::max(max_count, c.count[t]);
  }
  return max_count;
}

// The score groups of rows [begin, end): consecutive rows with candidates and one list, at most
// `per_group` a group.
std::vector<kernels::IndexerGroup> Groups(const EntryCandidates& c, int64_t begin, int64_t end,
                                          int per_group) {
  std::vector<kernels::IndexerGroup> groups;
  for (int64_t t = begin; t < end; ++t) {
    if (c.count[t] == 0) continue;
    kernels::IndexerGroup* g = groups.empty() ? nullptr : &groups.back();
    if (g == nullptr || g->first != c.first[t] || g->queries == per_group ||
        g->row + g->queries != t) {
      groups.push_back({static_cast<int32_t>(t), 0, 0, 0, c.first[t]});
      g = &groups.back();
    }
    ++g->queries;
    g->count = std::max(g->count, c.count[t]);
  }
  return groups;
}

// Whether two consecutive rows share a candidate list (prefill chunks do, decode rows do not).
bool RowsShareLists(const EntryCandidates& c) {
  for (size_t t = 1; t < c.count.size(); ++t) {
    if (c.count[t] > 0 && c.count[t - 1] > 0 && c.first[t] == c.first[t - 1]) return true;
  }
  return false;
}

// The score kernel's arguments that follow from the op's (the rest are the pass's).
kernels::IndexerScoreArgs ScoreArgs(const IndexerArgs& a, const int64_t* d_slots) {
  kernels::IndexerScoreArgs s;
  s.q = a.q;
  s.weights = a.weights;
  s.scale = 1.0f / std::sqrt(static_cast<float>(a.dim));
  s.weight_scale = a.weight_scale;
  s.heads = a.heads;
  s.dim = a.dim;
  s.keys = a.keys.present() ? a.keys.base + a.keys.offset : nullptr;  // unread without candidates
  s.key_stride = a.keys.stride;
  s.slots = d_slots;
  s.mask = a.mask;
  s.mask_stride = a.mask_stride;
  return s;
}

}  // namespace

void CudaDeepseekOps::IndexerTopK(const IndexerArgs& a) {
  b_.Activate();
  b_.Record(IndexerTopKImpl(a));
}

// Validates, plans the passes over score scratch (or the caller's score rows), then per pass:
// the unmasked candidates' lists when compacting, the scores of each row group, the top-k.
Status CudaDeepseekOps::IndexerTopKImpl(const IndexerArgs& a) {
  const EntryCandidates& c = a.candidates;
  const int64_t tokens = static_cast<int64_t>(c.count.size());
  if (tokens == 0) return Status::Ok();
  if (b_.in_graph()) return internal::RefuseInGraph("IndexerTopK");
  if (a.top_k < 0 || a.top_k > kernels::kMaxTopK) {
    return InvalidArgumentError("cuda backend: IndexerTopK top_k " + std::to_string(a.top_k) +
                                " (the GPU top-k keeps 0 to " + std::to_string(kernels::kMaxTopK) +
                                ")");
  }
  SPARK_ASSIGN_OR_RETURN(const int max_count, CheckCandidates(c, "IndexerTopK"));
  if (a.top_k == 0 && a.scores == nullptr) return Status::Ok();  // nothing to write
  if (max_count > 0 && !a.keys.present()) {
    return InvalidArgumentError("cuda backend: IndexerTopK has candidates but no key field");
  }
  if ((a.mask != nullptr || a.scores != nullptr) && max_count > a.mask_stride) {
    return InvalidArgumentError("cuda backend: IndexerTopK: " + std::to_string(max_count) +
                                " candidates exceed the mask/score stride " +
                                std::to_string(a.mask_stride));
  }
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const bool share = RowsShareLists(c);
  const bool compact =
      a.mask != nullptr && a.scores == nullptr && (!share || max_count >= kCompactFromCandidates);
  // Scores go to the caller's rows when it wants them, else to scratch, a pass of rows at a time.
  const int64_t stride = a.scores != nullptr ? a.mask_stride : std::max(1, max_count);
  const int64_t per_pass =
      a.scores != nullptr ? tokens : std::clamp<int64_t>(kScoreScratchFloats / stride, 1, tokens);
  Buffer scratch, index, kept;
  if (a.scores == nullptr) {
    SPARK_ASSIGN_OR_RETURN(scratch, b_.Scratch(per_pass * stride * sizeof(float)));
  }
  if (compact) {
    SPARK_ASSIGN_OR_RETURN(index, b_.Scratch(per_pass * stride * sizeof(int32_t)));
    SPARK_ASSIGN_OR_RETURN(kept, b_.Scratch(tokens * sizeof(int32_t)));
  }
  const int queries_per_group = kernels::IndexerQueriesPerGroup(a.heads, share && !compact);
  // Every pass's row groups, so the op's staging is reserved before its first span.
  std::vector<std::vector<kernels::IndexerGroup>> pass_groups;
  size_t staged = internal::StagedBytes(c.slots, c.count);
  for (int64_t begin = 0; begin < tokens; begin += per_pass) {
    pass_groups.push_back(Groups(c, begin, std::min(tokens, begin + per_pass),
                                 compact ? 1 : queries_per_group));
    staged += internal::StagedBytes(std::span<const kernels::IndexerGroup>(pass_groups.back()));
  }
  SPARK_RETURN_IF_ERROR(b_.ReserveStaging(staged));
  const int64_t* d_slots = nullptr;
  if (!c.slots.empty()) {
    SPARK_ASSIGN_OR_RETURN(d_slots, b_.Stage(c.slots));
  }
  SPARK_ASSIGN_OR_RETURN(const int32_t* d_count, b_.Stage(c.count));
  kernels::IndexerScoreArgs s = ScoreArgs(a, d_slots);
  s.queries_per_group = queries_per_group;
  s.scores = a.scores != nullptr ? a.scores : scratch.data();
  s.score_stride = stride;
  if (a.scores != nullptr && b_.launching()) {
    SPARK_RETURN_IF_ERROR(kernels::FillFloat(a.scores, tokens * stride, minus_inf, b_.stream_));
  }
  for (int64_t begin = 0, pass = 0; begin < tokens; begin += per_pass, ++pass) {
    const int64_t end = std::min(tokens, begin + per_pass);
    const std::vector<kernels::IndexerGroup>& groups = pass_groups[pass];
    const kernels::IndexerGroup* d_groups = nullptr;
    if (!groups.empty()) {
      SPARK_ASSIGN_OR_RETURN(d_groups, b_.Stage(std::span<const kernels::IndexerGroup>(groups)));
    }
    if (!b_.launching()) continue;
    s.groups = d_groups;
    s.num_groups = static_cast<int>(groups.size());
    s.max_count = 0;
    for (const kernels::IndexerGroup& g : groups) s.max_count = std::max(s.max_count, g.count);
    s.score_row0 = a.scores != nullptr ? 0 : begin;
    const int32_t* places = d_count;  // places a row scores: its candidates, or its unmasked ones
    const auto* map = static_cast<const int32_t*>(index.raw());
    if (compact) {
      auto* kept_rows = static_cast<int32_t*>(kept.raw());
      SPARK_RETURN_IF_ERROR(kernels::CompactCandidates(
          a.mask + begin * a.mask_stride, a.mask_stride, d_count + begin, end - begin,
          static_cast<int32_t*>(index.raw()), stride, kept_rows + begin, b_.stream_));
      places = kept_rows;
      s.candidate_index = map;
      s.index_stride = stride;
    }
    s.count = places;
    SPARK_RETURN_IF_ERROR(kernels::IndexerScores(s, b_.stream_));
    const float* rows = s.scores + (begin - s.score_row0) * stride;
    SPARK_RETURN_IF_ERROR(kernels::RowTopK(rows, stride, places + begin, static_cast<int>(stride),
                                           end - begin, a.top_k, a.selected + begin * a.top_k,
                                           b_.stream_, compact ? map : nullptr, stride));
  }
  return Status::Ok();
}

void CudaDeepseekOps::SparseAttention(const SparseAttentionArgs& a) {
  b_.Activate();
  b_.Record(SparseAttentionImpl(a));
}

Status CudaDeepseekOps::SparseAttentionImpl(const SparseAttentionArgs& a) {
  int64_t rows = 0;
  for (const AttentionSequence& seq : a.sequences) {
    rows = std::max(rows, seq.query_start + seq.query_len);
  }
  if (rows == 0) return Status::Ok();
  if (b_.in_graph()) return internal::RefuseInGraph("SparseAttention");
  const EntryCandidates& c = a.candidates;
  if (!c.count.empty()) {
    if (c.count.size() < static_cast<size_t>(rows)) {
      return InvalidArgumentError("cuda backend: SparseAttention got " +
                                  std::to_string(c.count.size()) + " candidate counts for " +
                                  std::to_string(rows) + " rows");
    }
    SPARK_RETURN_IF_ERROR(CheckCandidates(c, "SparseAttention").status());
  }
  if (a.block_size <= 0) {
    return InvalidArgumentError("cuda backend: SparseAttention block_size must be positive");
  }
  // Per row: its block table, window and entry places; the tables one after another.
  std::vector<int32_t> tables;
  std::vector<kernels::SparseRow> meta(rows);
  int max_keys = 0;
  for (const AttentionSequence& seq : a.sequences) {
    const int64_t blocks = (seq.context_len + a.block_size - 1) / a.block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks) {
      return InvalidArgumentError("cuda backend: SparseAttention: a block table of " +
                                  std::to_string(seq.block_table.size()) + " blocks for " +
                                  std::to_string(seq.context_len) + " tokens");
    }
    const int32_t offset = static_cast<int32_t>(tables.size());
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.begin() + blocks);
    for (int64_t i = 0; i < seq.query_len; ++i) {
      const int64_t t = seq.query_start + i;
      const int64_t p = seq.context_len - seq.query_len + i;
      const int64_t window = a.window > 0 ? std::min<int64_t>(a.window, p + 1) : 0;
      const int count = c.count.empty() ? 0 : c.count[t];
      const int entries = count == 0 ? 0 : (a.selected != nullptr ? a.top_k : count);
      meta[t] = {offset, static_cast<int32_t>(p - window + 1), static_cast<int32_t>(window),
                 entries, count == 0 ? 0 : c.first[t]};
      max_keys = std::max(max_keys, static_cast<int>(window) + entries);
    }
  }
  const auto any = [&](auto has) { return std::any_of(meta.begin(), meta.end(), has); };
  if ((any([](const kernels::SparseRow& r) { return r.entries > 0; }) && !a.entries.present()) ||
      (any([](const kernels::SparseRow& r) { return r.window > 0; }) && !a.window_keys.present())) {
    return InvalidArgumentError(
        "cuda backend: SparseAttention has window keys or entries to read but no such field");
  }
  if (tables.empty()) tables.push_back(0);  // no context at all: a table nothing reads
  SPARK_RETURN_IF_ERROR(b_.ReserveStaging(
      internal::StagedBytes(std::span<const int32_t>(tables),
                            std::span<const kernels::SparseRow>(meta), c.slots)));
  SPARK_ASSIGN_OR_RETURN(const int32_t* d_tables, b_.Stage(std::span<const int32_t>(tables)));
  SPARK_ASSIGN_OR_RETURN(const kernels::SparseRow* d_meta,
                         b_.Stage(std::span<const kernels::SparseRow>(meta)));
  const int64_t* d_slots = nullptr;
  if (!c.slots.empty()) {
    SPARK_ASSIGN_OR_RETURN(d_slots, b_.Stage(c.slots));
  }
  const kernels::SparseAttentionPlan plan =
      kernels::PlanSparseAttention(rows, a.heads, a.head_dim, max_keys, b_.sm_count_);
  Buffer workspace;
  if (plan.workspace_floats > 0) {
    SPARK_ASSIGN_OR_RETURN(workspace, b_.Scratch(plan.workspace_floats * sizeof(float)));
  }
  if (!b_.launching()) return Status::Ok();
  kernels::SparseAttentionParams p;
  p.q = a.q;
  p.heads = a.heads;
  p.head_dim = a.head_dim;
  p.scale = a.scale;
  p.rows = d_meta;
  p.num_rows = rows;
  p.tables = d_tables;
  p.block_size = a.block_size;
  p.window_keys = Rows(a.window_keys);
  p.entries = Rows(a.entries);
  p.slots = d_slots;
  p.selected = a.selected;
  p.top_k = a.top_k;
  p.sinks = a.sinks;
  p.out = a.out;
  return kernels::SparseAttention(p, plan, workspace.data(), b_.stream_);
}

}  // namespace spark::engine::backend::cuda
