// The integer inputs of one forward step's DeepSeek ops, worked out on the host from the batch
// (positions and block tables) once per step: they depend on a layer's compression ratio, not on
// the layer, so every CSA layer (and every HCA layer) of the step shares them.
//   - which compressed entries the step's tokens close, and the slots each entry pools;
//   - the entries each query may attend (its candidates).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/deepseek_op_args.h"
#include "engine/core/model_config.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"

namespace spark::engine::model::dsv4 {

// Entries closed in this step, in CompressArgs' form: a token at position p closes window
// w = (p + 1) / ratio - 1 when (p + 1) % ratio == 0; the entry pools window w's tokens (with
// overlap, window w - 1's first: missing, -1, for w = 0), is rotated at w * ratio and written
// at the closing token's slot.
struct Compression {
  int pool = 0;
  bool overlap = false;
  std::vector<int64_t> source_slots;  // [entries, pool]
  std::vector<int64_t> entry_slots;
  std::vector<int32_t> entry_positions;
};

// Per query at position p: entries w < (p + 1) / ratio of its sequence, at the slots of their
// closing tokens (w * ratio + ratio - 1), oldest first.
struct Candidates {
  std::vector<int64_t> slots;  // every sequence's list, one after another
  std::vector<int64_t> first;  // [tokens]
  std::vector<int32_t> count;  // [tokens]
  backend::EntryCandidates view() const { return {slots, first, count}; }
};

struct CompressedPlan {
  int ratio = 0;
  Compression compression;
  Candidates candidates;
};

struct StepPlan {
  std::vector<backend::AttentionSequence> sequences;  // block tables point into the batch
  CompressedPlan csa, hca;                            // overlap for CSA, none for HCA
};

// The entries that the batch's tokens close and the candidates of each query for one ratio
// (overlap: CSA's two series). V4.1 plans each of its KV sources' ratios with it.
CompressedPlan PlanCompressed(const ForwardBatch& batch, int block_size, int ratio, bool overlap);

// The batch must be validated (block tables cover every position).
StepPlan PlanStep(const ForwardBatch& batch, int block_size, const core::DeepseekV4Settings& d);

// What every DeepSeek model checks before a step: the batch against the cache (its shape, the
// blocks) and the vocabulary, that the cache was made for a model of `spec`'s layers and layer
// widths, and that each token's position is its place in its sequence (the attention op
// places queries by context_len; the RoPE and entry lists by position). InvalidArgument.
Status CheckStep(const ForwardBatch& batch, const PagedKvCache& cache, const KvCacheSpec& spec,
                 int vocab_size);

}  // namespace spark::engine::model::dsv4
