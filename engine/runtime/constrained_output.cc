#include "engine/runtime/constrained_output.h"

#include <string>

namespace spark::engine::runtime {

ConstrainedOutput::ConstrainedOutput(std::unique_ptr<TokenConstraint> constraint,
                                     const ConstraintGate& gate)
    : constraint_(std::move(constraint)), gate_(gate) {
  if (gate.starts_in_reasoning && gate.think_end >= 0) {
    state_ = State::kInsideThink;
  } else if (gate.may_open && gate.think_begin >= 0 && gate.think_end >= 0) {
    state_ = State::kMayOpenThink;
  } else {
    state_ = State::kActive;
  }
}

Status ConstrainedOutput::FillMask(std::span<uint32_t> mask) {
  SPARK_RETURN_IF_ERROR(constraint_->FillNextTokenMask(mask));
  if (state_ == State::kMayOpenThink) {
    const auto t = static_cast<size_t>(gate_.think_begin);
    if (t / 32 < mask.size()) mask[t / 32] |= 1u << (t % 32);
  }
  return Status::Ok();
}

Status ConstrainedOutput::Advance(int32_t token) {
  switch (state_) {
    case State::kInsideThink:
      if (token == gate_.think_end) state_ = State::kActive;
      return Status::Ok();
    case State::kMayOpenThink:
      if (token == gate_.think_begin) {
        state_ = State::kInsideThink;
        return Status::Ok();
      }
      state_ = State::kActive;
      break;
    case State::kActive:
      break;
  }
  Status s = constraint_->Accept(token);
  if (!s.ok()) {
    return InvalidArgumentError("structured output: token " + std::to_string(token) +
                                " is not allowed by the grammar (" + s.message() + ")");
  }
  return Status::Ok();
}

}  // namespace spark::engine::runtime
