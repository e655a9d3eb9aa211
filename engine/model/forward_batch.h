// ForwardBatch: what one forward step computes — the new tokens of several sequences, their
// positions, where their K/V go in the paged cache and each sequence's block table.
//
// The runtime's scheduler and block manager fill it (rank 0 broadcasts it as part of the step
// plan); the model only reads it. Tokens are laid out sequence after sequence. A sequence in
// prefill contributes its whole prompt (or a chunk of it), one in decode contributes one token.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace spark::engine::model {

struct BatchSequence {
  int64_t query_len = 0;             // new tokens of this sequence in this step
  int64_t context_len = 0;           // tokens in its KV cache after this step (earlier + new)
  std::vector<int32_t> block_table;  // KV block ids; token j lives in block_table[j / block_size]
  // Logits rows of this sequence: its last `logits_rows` new tokens (1: the last one; more when
  // a speculative step verifies draft tokens, runtime/drafter.h). 1 <= logits_rows <= query_len.
  int64_t logits_rows = 1;
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // all new tokens, sequence after sequence
  std::vector<int32_t> positions;  // per token: its position in its sequence
  std::vector<int64_t> slots;      // per token: KV cache slot (block * block_size + offset)
  std::vector<BatchSequence> sequences;
  // false: logits of each sequence's last logits_rows tokens (serving); true: of every token
  // (tests, scoring).
  bool all_logits = false;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  // Rows of the logits that Forward returns.
  int64_t num_logit_rows() const;

  // Adds a sequence whose cache already holds `cached` tokens and which now appends `tokens`;
  // positions and slots follow from the block table.
  void AddSequence(std::span<const int32_t> tokens, int64_t cached,
                   std::vector<int32_t> block_table, int block_size, int64_t logits_rows = 1);

  // InvalidArgument when sizes disagree, a block table is too short for context_len, a slot or
  // block id is outside a cache of num_blocks x block_size, or a token id is outside the vocab.
  Status Validate(int block_size, int64_t num_blocks, int vocab_size) const;
};

// One block of a model's own drafter (Model::DraftTokens): `count` tokens that may follow
// `anchor`, a sequence's token at `position` that no forward has run yet (every earlier
// position has). `block_table` covers positions up to position + count - 1: the drafter writes
// state at those slots, which the sequence's next forward overwrites.
struct DraftBlock {
  int32_t anchor = 0;
  int32_t position = 0;
  std::span<const int32_t> block_table;
  int count = 0;
};

}  // namespace spark::engine::model
