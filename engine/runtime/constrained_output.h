// ConstrainedOutput: one sequence's structured-output state — its grammar matcher and the gate
// that keeps a think block unconstrained (token_constraint.h). The engine asks it for the mask
// of the next token and tells it each token sampled.
// Thread-safety: none; the engine thread, or one mask worker while the forward runs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "engine/runtime/token_constraint.h"

namespace spark::engine::runtime {

class ConstrainedOutput {
 public:
  ConstrainedOutput(std::unique_ptr<TokenConstraint> constraint, const ConstraintGate& gate);

  // The next token is constrained (false inside a think block).
  bool active() const { return state_ != State::kInsideThink; }
  // The mask of the next token: the grammar's, plus think_begin while the model may still open
  // a think block. Only when active().
  Status FillMask(std::span<uint32_t> mask);
  // Follows a sampled token. InvalidArgument when the grammar does not allow it.
  Status Advance(int32_t token);
  // The grammar is complete and took its stop token.
  bool terminated() const { return constraint_->IsTerminated(); }

 private:
  enum class State { kMayOpenThink, kInsideThink, kActive };

  std::unique_ptr<TokenConstraint> constraint_;
  const ConstraintGate gate_;
  State state_;
};

}  // namespace spark::engine::runtime
