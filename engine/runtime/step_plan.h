// StepPlan: what every rank runs in one engine step. Rank 0's scheduler makes it and
// broadcasts it (Serialize -> comm::BroadcastBytes -> Deserialize); every rank then runs the
// same forward. One entry per scheduled sequence: the tokens to run this step (a prefill
// chunk or one decode token), the position of the first one, the block table covering all of
// its positions, and whether rank 0 needs logits for its last token (and for its draft tokens
// in a speculative step: the drafts travel with the plan, so every rank runs the same forward).
// Wire format (little-endian, see docs/engine-runtime.md): header, then entries.
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace spark::engine::runtime {

enum class StepCommand : uint8_t {
  kRun = 0,       // Run the entries; rank 0 gets a logits row per needs_logits entry.
  kShutdown = 1,  // Workers leave their loop; no entries.
  kRunArgMax = 2,  // Run the entries; rank 0 gets only the greedy (argmax) id of each row.
  // No entries: every rank reads its node's available memory and the ranks all-gather it (the
  // memory guard's reading of the group, plan_broadcast.h).
  kMemoryPoll = 3,
  // One entry: every rank runs its model's draft model (ModelRunner::DraftTokens) for the
  // entry's one token (the anchor) at start_pos over its block table, drafting
  // num_draft_tokens tokens; rank 0 keeps the drafts.
  kDraft = 4,
};

struct StepPlanEntry {
  uint64_t seq_id = 0;
  std::vector<int32_t> token_ids;
  int32_t start_pos = 0;
  std::vector<int32_t> block_table;
  bool needs_logits = false;
  // Speculative step: the last num_draft_tokens of token_ids are a drafter's proposal
  // (drafter.h), verified in this forward; the entry then needs 1 + num_draft_tokens logits rows
  // (its last token before the drafts, and each draft). needs_logits is set.
  int32_t num_draft_tokens = 0;
  // Prompt scoring (SamplingParams::prompt_logprobs): rank 0 needs a logits row for every token
  // of the entry, not only the last; needs_logits is set, there are no drafts.
  bool prompt_logits = false;

  int logits_rows() const {
    return prompt_logits ? static_cast<int>(token_ids.size()) : 1 + num_draft_tokens;
  }

  friend bool operator==(const StepPlanEntry&, const StepPlanEntry&) = default;
};

struct StepPlan {
  StepCommand command = StepCommand::kRun;
  uint64_t step = 0;
  std::vector<StepPlanEntry> entries;

  int num_tokens() const;
  // Rows of logits rank 0 gets back: logits_rows() of every needs_logits entry.
  int num_logits_rows() const;
  std::vector<uint8_t> Serialize() const;
  // DataLoss for a truncated or malformed buffer, naming the offset.
  static Result<StepPlan> Deserialize(const std::vector<uint8_t>& bytes);

  friend bool operator==(const StepPlan&, const StepPlan&) = default;
};

}  // namespace spark::engine::runtime
