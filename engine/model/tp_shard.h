// TpShard: which part of each weight a tensor-parallel rank holds.
//
// Column-parallel layers (q/k/v, gate/up) split their output rows: q by heads, k/v by KV heads
// (replicated when there are fewer KV heads than ranks), gate/up by intermediate channels.
// Row-parallel layers (o, down) split their input columns the same way, so each rank's partial
// output is summed by one all-reduce. Embedding and lm_head split the vocabulary (ceil division;
// the last ranks may hold fewer rows). MoE experts are split inside each expert (intermediate
// channels) or by expert (whole experts per rank), see MoeSharding.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/core/model_config.h"

namespace spark::engine::model {

struct Range {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
};

enum class MoeSharding { kInsideExperts, kByExpert };

struct TpShard {
  int rank = 0;
  int size = 1;

  // InvalidArgument naming the config key that the world size does not divide.
  Status CheckFits(const core::ModelConfig& config, MoeSharding moe) const;

  Range Heads(const core::ModelConfig& c) const;    // query heads
  Range KvHeads(const core::ModelConfig& c) const;  // one replicated head when kv < size
  Range Even(int64_t total) const;                  // total % size == 0 (checked by CheckFits)
  Range Vocab(int64_t vocab) const;                 // ceil split
  int64_t VocabPadded(int64_t vocab) const { return (vocab + size - 1) / size; }
};

}  // namespace spark::engine::model
