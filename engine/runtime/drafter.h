// Speculative decoding as the runtime sees it: a Drafter proposes up to k tokens that may follow
// a running sequence; the scheduler puts them after the sequence's last token in its StepPlan
// entry (StepPlanEntry::num_draft_tokens), so every rank of a tensor-parallel group runs the
// same verify forward; the engine then checks the drafts row by row against the target's logits
// (sampler.h VerifyDraftToken: greedy, or rejection sampling at temperature > 0), keeps the
// accepted prefix plus the target's own next token, and shortens the sequence's KV state to
// what it keeps (Scheduler::CommitDraft). Greedy output is token for token that of a run
// without drafts; sampled output has the target's distribution. docs/speculative.md.
// Thread-safety: a Drafter is used by the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/runtime/sequence.h"

namespace spark::engine::runtime {

struct SpeculativeOptions {
  // "none", "ngram" (prompt lookup, every model), "dspark" (the checkpoint's own DSpark draft
  // stack: DeepSeek-V4.1).
  std::string method = "none";
  // Draft tokens proposed per sequence and step (1..16 with a method).
  int num_speculative_tokens = 0;
  // ngram: the longest and shortest suffix (in tokens) matched against the sequence's earlier
  // tokens.
  static constexpr int kDefaultLookupMax = 4, kDefaultLookupMin = 1;
  int prompt_lookup_max = kDefaultLookupMax;
  int prompt_lookup_min = kDefaultLookupMin;

  bool enabled() const { return method != "none"; }
  // InvalidArgument naming the field and the fix; for mtp, Unimplemented saying what works.
  Status Validate() const;
  // Whether the model must load its own draft model (ModelOptions::load_draft).
  bool needs_draft_model() const { return method == "dspark"; }
};

// A sequence a step drafts for, and how many draft tokens fit its step.
struct DraftRequest {
  const Sequence* seq = nullptr;
  int max_tokens = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max_tokens` tokens that may follow `tokens` (a sequence's prompt and output so far);
  // empty when it has no guess.
  virtual std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) = 0;

  // A model drafter writes state at the KV slots of the positions it drafts from: the tokens
  // past the sequence's last one whose blocks the scheduler must hold before ProposeFor (0 for
  // drafters that read tokens only).
  virtual int block_tokens() const { return 0; }
  // Propose with the sequence's KV state. Its block table covers block_tokens() positions from
  // its last token on.
  virtual std::vector<int32_t> ProposeFor(const Sequence& seq, int max_tokens) {
    return Propose(seq.token_ids(), max_tokens);
  }
  // ProposeFor of several sequences, in order. A model drafter runs every block in one forward
  // (the scheduler asks once a step, after it has held each sequence's blocks).
  virtual std::vector<std::vector<int32_t>> ProposeForAll(std::span<const DraftRequest> requests) {
    std::vector<std::vector<int32_t>> out;
    for (const DraftRequest& r : requests) out.push_back(ProposeFor(*r.seq, r.max_tokens));
    return out;
  }
  // The first error a proposal met (a model drafter's forward); the engine fails the step.
  virtual Status status() const { return Status::Ok(); }
};

class ModelRunner;

// The drafter of `options` (enabled()), or its Validate error; dspark drafts with `runner`'s
// draft model (FailedPrecondition when it has none).
Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeOptions& options,
                                             ModelRunner* runner = nullptr);

}  // namespace spark::engine::runtime
