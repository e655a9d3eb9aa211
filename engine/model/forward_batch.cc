#include "engine/model/forward_batch.h"

#include <string>

namespace spark::engine::model {

int64_t ForwardBatch::num_logit_rows() const {
  if (all_logits) return num_tokens();
  int64_t rows = 0;
  for (const BatchSequence& s : sequences) rows += s.logits_rows;
  return rows;
}

void ForwardBatch::AddSequence(std::span<const int32_t> tokens, int64_t cached,
                               std::vector<int32_t> block_table, int block_size,
                               int64_t logits_rows) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = cached + static_cast<int64_t>(i);
    token_ids.push_back(tokens[i]);
    positions.push_back(static_cast<int32_t>(pos));
    const int64_t block = pos / block_size;
    slots.push_back(block < static_cast<int64_t>(block_table.size())
                        ? static_cast<int64_t>(block_table[block]) * block_size + pos % block_size
                        : -1);  // Validate reports the short block table
  }
  sequences.push_back({static_cast<int64_t>(tokens.size()),
                       cached + static_cast<int64_t>(tokens.size()), std::move(block_table),
                       logits_rows});
}

Status ForwardBatch::Validate(int block_size, int64_t num_blocks, int vocab_size) const {
  const size_t n = token_ids.size();
  if (positions.size() != n || slots.size() != n) {
    return InvalidArgumentError("forward batch: " + std::to_string(n) + " tokens but " +
                                std::to_string(positions.size()) + " positions and " +
                                std::to_string(slots.size()) + " slots");
  }
  int64_t rows = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const BatchSequence& seq = sequences[s];
    const std::string where = "forward batch: sequence " + std::to_string(s) + ": ";
    if (seq.query_len <= 0 || seq.query_len > seq.context_len) {
      return InvalidArgumentError(where + "needs 0 < query_len <= context_len");
    }
    if (seq.logits_rows < 1 || seq.logits_rows > seq.query_len) {
      return InvalidArgumentError(where + "needs 1 <= logits_rows (" +
                                  std::to_string(seq.logits_rows) + ") <= query_len (" +
                                  std::to_string(seq.query_len) + ")");
    }
    if (static_cast<int64_t>(seq.block_table.size()) * block_size < seq.context_len) {
      return InvalidArgumentError(where + "block table of " +
                                  std::to_string(seq.block_table.size()) + " blocks cannot hold " +
                                  std::to_string(seq.context_len) + " tokens");
    }
    for (int32_t b : seq.block_table) {
      if (b < 0 || b >= num_blocks) {
        return InvalidArgumentError(where + "block id " + std::to_string(b) +
                                    " outside the cache's " + std::to_string(num_blocks) +
                                    " blocks");
      }
    }
    rows += seq.query_len;
  }
  if (rows != static_cast<int64_t>(n)) {
    return InvalidArgumentError("forward batch: sequences hold " + std::to_string(rows) +
                                " new tokens but the batch has " + std::to_string(n));
  }
  for (size_t t = 0; t < n; ++t) {
    if (token_ids[t] < 0 || token_ids[t] >= vocab_size) {
      return InvalidArgumentError("forward batch: token id " + std::to_string(token_ids[t]) +
                                  " outside the vocabulary [0, " + std::to_string(vocab_size) +
                                  ")");
    }
    if (slots[t] < 0 || slots[t] >= num_blocks * block_size) {
      return InvalidArgumentError("forward batch: token " + std::to_string(t) + " has KV slot " +
                                  std::to_string(slots[t]) + " outside the cache");
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::model
