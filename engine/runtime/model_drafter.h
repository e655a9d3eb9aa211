// ModelDrafter: drafts with the model's own draft model (ModelRunner::DraftTokens: DeepSeek-V4.1's
// DSpark stack). Each proposal is one draft block of `block` tokens from the sequence's last
// token, which no step has run yet, at its position; the block writes state at the slots of
// those positions, so the scheduler holds their blocks first (block_tokens()). The draft is cut
// to what the step has room for. A step's sequences draft together: one draft plan, one
// forward (ProposeForAll). Rank 0's engine drafts; under tensor parallelism its runner has the
// workers draft in lockstep (BroadcastingModelRunner).
// Thread-safety: the engine thread only.
#pragma once

#include "engine/runtime/drafter.h"
#include "engine/runtime/model_runner.h"

namespace spark::engine::runtime {

class ModelDrafter : public Drafter {
 public:
  ModelDrafter(ModelRunner* runner, int block) : runner_(runner), block_(block) {}

  // Without the sequence's blocks there is no model state to draft from: no guess.
  std::vector<int32_t> Propose(std::span<const int32_t>, int) override { return {}; }
  int block_tokens() const override { return block_; }
  std::vector<int32_t> ProposeFor(const Sequence& seq, int max_tokens) override;
  std::vector<std::vector<int32_t>> ProposeForAll(std::span<const DraftRequest> requests) override;
  Status status() const override { return status_; }

 private:
  ModelRunner* runner_;
  const int block_;
  Status status_;
};

}  // namespace spark::engine::runtime
