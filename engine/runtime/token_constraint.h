// Structured output as the engine sees it: a TokenConstraint says which tokens one sequence may
// produce next (a bitmask over the vocabulary) and follows the tokens it did produce. A grammar
// library implements it (engine/grammar over xgrammar); the engine only asks for a mask before
// sampling and reports the sampled token after. Masks of one step are computed on worker
// threads while the model's forward runs (constraint_masks.h), for all constrained sequences of
// the batch at once.
//
// Speculative verification (later) uses the same interface: to check k draft tokens, accept
// them one by one filling a mask before each (k + 1 masks for one forward), then Rollback the
// ones the target model rejected.
// Thread-safety: a ConstraintSpec is immutable and shared; one TokenConstraint belongs to one
// sequence and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace spark::engine::runtime {

// Mask layout (xgrammar's): bit t % 32 of word t / 32 set = token t allowed.
inline int MaskWords(int vocab_size) { return (vocab_size + 31) / 32; }
inline bool MaskAllows(std::span<const uint32_t> mask, int32_t token) {
  return (mask[static_cast<size_t>(token) / 32] >> (token % 32)) & 1u;
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the tokens allowed next into `mask` (MaskWords(vocab) words). Internal on a library
  // failure.
  virtual Status FillNextTokenMask(std::span<uint32_t> mask) = 0;
  // Advances past `token`. InvalidArgument when the grammar does not allow it.
  virtual Status Accept(int32_t token) = 0;
  // Undoes the last `num_tokens` accepted tokens. InvalidArgument beyond what it keeps.
  virtual Status Rollback(int num_tokens) = 0;
  // The grammar is complete and a stop token was accepted: nothing more may follow.
  virtual bool IsTerminated() const = 0;
};

// A compiled grammar, shared by every sequence that follows it.
class ConstraintSpec {
 public:
  virtual ~ConstraintSpec() = default;
  // A fresh matcher at the grammar's start. Internal on a library failure.
  virtual Result<std::unique_ptr<TokenConstraint>> NewConstraint() const = 0;
  // What it enforces, for logs ("json_schema", "regex", ...).
  virtual std::string Describe() const = 0;
};

// When the constraint applies. Reasoning models think first: as in vLLM, structured output
// starts after the think block. Token ids of the markers (-1: the format has none as one token).
struct ConstraintGate {
  int32_t think_begin = -1;
  int32_t think_end = -1;
  // The prompt ends inside an open think block: unconstrained until think_end.
  bool starts_in_reasoning = false;
  // The model may open a think block with its first token (think_begin allowed besides the
  // grammar's tokens); if it does, unconstrained until think_end.
  bool may_open = false;
};

}  // namespace spark::engine::runtime
